import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Blackboard } from '../blackboard/client.ts';
import { Artefact } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import { consoleAssets } from './assets.ts';
import { WorkflowIndex, type WorkflowRow } from './model.ts';

/**
 * The console's server (docs/console.md): the page and its assets, the workflows as JSON, and their
 * changes as server-sent events fed by the blackboard's artefact channel. The board is read once, at
 * start; after that only what is announced (and, as a backstop for pub/sub's lost messages, the ids
 * it has not seen) is read. A browser gets in with the one-time token of the URL `holt console`
 * prints, which it trades for a session cookie (HttpOnly, SameSite=Strict); every answer carries a
 * Content-Security-Policy that allows the console's own scripts and nothing else.
 */

export interface ConsoleOptions {
  /** The board; its connection's settings (TLS, credentials) make the console's subscription too. */
  bb: Blackboard;
  log: Logger;
  host?: string;
  port?: number;
  /** The one-time token; random when not given. */
  token?: string;
  /** How often the ids of the board are compared with what the console has (pub/sub loses messages). */
  backstopMs?: number;
}

export interface Console {
  /** The URL to open, with its one-time token. */
  url: string;
  port: number;
  close(): Promise<void>;
}

export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const SECURITY_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/** Events kept for a browser that reconnects (Last-Event-ID); one further back gets `reset`. */
const REPLAY = 1000;
const COOKIE = 'holt_console';

const same = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

function cookieOf(req: IncomingMessage): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === COOKIE) return v.join('=');
  }
  return undefined;
}

export async function startConsole(o: ConsoleOptions): Promise<Console> {
  const assets = consoleAssets();
  const oneTime = o.token ?? randomBytes(24).toString('base64url');
  let token: string | undefined = oneTime;
  const sessions = new Set<string>();
  const index = new WorkflowIndex();
  const events: { id: number; row: WorkflowRow }[] = [];
  let seq = 0;
  const clients = new Set<ServerResponse>();

  const publish = (rows: WorkflowRow[]) => {
    for (const row of rows) {
      events.push({ id: ++seq, row });
      if (events.length > REPLAY) events.shift();
      for (const c of clients) c.write(`id: ${seq}\nevent: workflow\ndata: ${JSON.stringify(row)}\n\n`);
    }
  };
  const take = (list: Artefact[]) => {
    for (const a of [...list].sort((x, y) => x.created_at_ms - y.created_at_ms)) publish(index.add(a));
  };
  /** The artefacts the console has not seen yet, read by id (the whole board only the first time). */
  const catchUp = async () => {
    const unseen = (await o.bb.listArtefactIds()).filter((id) => !index.has(id));
    if (unseen.length) take((await o.bb.getArtefacts(unseen)).filter((a): a is Artefact => a !== null));
  };
  await catchUp();

  // Re-subscribed by hand after a reconnect (ioredis' own leaves its SUBSCRIBE uncaught when closed
  // meanwhile); what was published while it was away is read by the catch-up.
  const channel = o.bb.k.channels.artefactEvents;
  const sub = o.bb.redis.duplicate({ autoResubscribe: false });
  sub.on('error', () => undefined);
  sub.on('message', (_ch: string, raw: string) => {
    let parsed: ReturnType<typeof Artefact.safeParse>;
    try {
      parsed = Artefact.safeParse(JSON.parse(raw));
    } catch {
      return;
    }
    // An artefact whose sources the console missed waits for the catch-up, which reads them first.
    if (parsed.success && parsed.data.source_artefacts.every((s) => index.has(s)))
      publish(index.add(parsed.data));
  });
  await sub.subscribe(channel);
  let lost = false;
  sub.on('close', () => {
    lost = true;
  });
  sub.on('ready', () => {
    if (!lost) return;
    lost = false;
    sub.subscribe(channel).catch(() => undefined);
    catchUp().catch(() => undefined);
  });
  const backstop = setInterval(() => {
    catchUp().catch((e: unknown) =>
      o.log.warn({ event_type: 'console_catch_up_failed', error: String(e) }, 'catch-up failed'),
    );
  }, o.backstopMs ?? 30_000);

  const refuse = (res: ServerResponse, status: number, text: string) => {
    res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8' });
    res.end(`${text}\n`);
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://console');
    if (req.method !== 'GET') return refuse(res, 405, 'method not allowed');
    // The one-time token, traded for a session: the address bar and history keep no credential.
    const offered = url.searchParams.get('token');
    if (offered !== null) {
      if (!token || !same(offered, token)) return refuse(res, 401, 'this console link was used or is wrong');
      token = undefined;
      const session = randomBytes(24).toString('base64url');
      sessions.add(session);
      res.writeHead(303, {
        ...SECURITY_HEADERS,
        location: '/',
        'set-cookie': `${COOKIE}=${session}; HttpOnly; SameSite=Strict; Path=/`,
      });
      return res.end();
    }
    const session = cookieOf(req);
    if (!session || ![...sessions].some((s) => same(s, session)))
      return refuse(res, 401, 'open the link holt console printed');
    if (url.pathname === '/api/workflows') {
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'application/json' });
      return res.end(JSON.stringify({ workflows: index.list(), lastEventId: seq }));
    }
    if (url.pathname === '/api/events') {
      res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream' });
      // Where the browser was: its Last-Event-ID on a reconnect, else the list it read (`after`).
      const last = Number(req.headers['last-event-id'] ?? url.searchParams.get('after') ?? Number.NaN);
      if (Number.isInteger(last) && last !== seq) {
        const missed = events.filter((e) => e.id > last);
        // Too far back (or from before a restart): the browser reads the list again.
        if (last > seq || missed[0]?.id !== last + 1) res.write('event: reset\ndata: {}\n\n');
        else
          for (const e of missed)
            res.write(`id: ${e.id}\nevent: workflow\ndata: ${JSON.stringify(e.row)}\n\n`);
      }
      res.write(': connected\n\n');
      clients.add(res);
      req.on('close', () => clients.delete(res));
      return;
    }
    const asset = assets.get(url.pathname === '/index.html' ? '/' : url.pathname);
    if (!asset) return refuse(res, 404, 'not found');
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type });
    res.end(asset.body);
  });
  const keepalive = setInterval(() => {
    for (const c of clients) c.write(': keepalive\n\n');
  }, 15_000);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, o.host ?? '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  const host = o.host && o.host !== '0.0.0.0' ? o.host : '127.0.0.1';
  return {
    url: `http://${host}:${port}/?token=${encodeURIComponent(oneTime)}`,
    port,
    async close() {
      clearInterval(backstop);
      clearInterval(keepalive);
      for (const c of clients) c.end();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      sub.disconnect();
    },
  };
}
