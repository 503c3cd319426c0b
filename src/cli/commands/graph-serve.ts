import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Blackboard } from '../../blackboard/client.ts';
import type { ArtefactGraph } from '../../graph/model.ts';
import { graphPage, inlineSvg } from '../../graph/page.ts';
import { toDot } from '../../graph/render.ts';
import { dotToSvg } from '../../graph/svg.ts';
import { CliError, EXIT, err, out } from '../output.ts';

/** How often the blackboard is read again for a live page. */
const POLL_MS = 1000;

/**
 * `holt graph -o html --serve`: the page on 127.0.0.1, redrawn while the workflow runs. The blackboard
 * is read every second; when the picture changed, every open page gets it (server-sent events).
 */
export async function serveGraph(
  bb: Blackboard,
  title: string,
  draw: () => Promise<ArtefactGraph>,
  port = '0',
): Promise<void> {
  const wanted = Number(port);
  if (!Number.isInteger(wanted) || wanted < 0 || wanted > 65535)
    throw new CliError(`--port: "${port}" is not a port number`, EXIT.usage);
  let current = { dot: '', svg: '', artefacts: 0, at: 0 };
  const clients = new Set<ServerResponse>();
  const send = (res: ServerResponse) =>
    res.write(
      `event: graph\ndata: ${JSON.stringify({ svg: inlineSvg(current.svg), artefacts: current.artefacts, at: current.at })}\n\n`,
    );
  const refresh = async () => {
    const g = await draw();
    const dot = toDot(g, title);
    if (dot === current.dot) return;
    current = { dot, svg: await dotToSvg(dot), artefacts: g.nodes.length, at: Date.now() };
    for (const c of clients) send(c);
  };
  await refresh();
  const server = createServer((req, res) => {
    if (req.url === '/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      clients.add(res);
      req.on('close', () => clients.delete(res));
      return send(res);
    }
    if (req.url !== '/' && req.url !== '/index.html') return void res.writeHead(404).end('not found\n');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(graphPage(current.svg, title, true));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new CliError(`--port ${wanted}: ${e.message}`, EXIT.error)));
    server.listen(wanted, '127.0.0.1', resolve);
  });
  out(`Serving the live graph at http://127.0.0.1:${(server.address() as AddressInfo).port}/ (Ctrl-C stops)`);
  let busy = false; // a slow read is not overlapped by the next one
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    refresh()
      .catch((e: unknown) => err(`graph: ${e instanceof Error ? e.message : String(e)}; retrying`))
      .finally(() => {
        busy = false;
      });
  }, POLL_MS);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  clearInterval(timer);
  for (const c of clients) c.end();
  server.close();
  await bb.close();
}
