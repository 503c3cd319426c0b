import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Blackboard } from '../../blackboard/client.ts';
import { errorMessage } from '../../common/errors.ts';
import type { ArtefactGraph } from '../../graph/model.ts';
import { graphPage, inlineSvg } from '../../graph/page.ts';
import { toDot } from '../../graph/render.ts';
import { dotToSvg } from '../../graph/svg.ts';
import { CliError, EXIT, err, out } from '../output.ts';

/** How often a change announced on the blackboard's channels is drawn, at most. */
const POLL_MS = 1000;
/** Pub/sub is at-most-once: the board is read again this often even when nothing was announced. */
const BACKSTOP_MS = 15_000;

/**
 * `holt graph -o html --serve`: the page on 127.0.0.1, redrawn while the workflow runs. The board is
 * read again (at most once a second) when an artefact or a claim change is announced, and every 15 s
 * regardless; when the picture changed, every open page gets it (server-sent events). An idle board
 * costs one read per 15 s, however large.
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
  // Any artefact or claim change marks the picture stale; a lost message waits for the backstop.
  // Re-subscribed by hand (ioredis' autoResubscribe leaves its SUBSCRIBE uncaught when closed meanwhile).
  const sub = bb.redis.duplicate({ autoResubscribe: false });
  sub.on('error', () => undefined); // ioredis reconnects; the backstop covers the gap
  let stale = false;
  let lastRead = Date.now();
  sub.on('message', () => {
    stale = true;
  });
  const ch = bb.k.channels;
  const channels = [ch.artefactEvents, ch.claimEvents, ch.claimUpdates];
  await sub.subscribe(...channels);
  sub.on('ready', () => {
    stale = true; // what was published while it was away
    sub.subscribe(...channels).catch(() => undefined);
  });
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
    if (busy || (!stale && Date.now() - lastRead < BACKSTOP_MS)) return;
    busy = true;
    stale = false;
    lastRead = Date.now();
    refresh()
      .catch((e: unknown) => {
        stale = true;
        err(`graph: ${errorMessage(e)}; retrying`);
      })
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
  sub.disconnect();
  for (const c of clients) c.end();
  server.close();
  await bb.close();
}
