import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Registry } from 'prom-client';
import { CONSOLE_BASE } from '../access/tokens.ts';
import { contextFrom, parseCarrier, type TraceCarrier } from '../telemetry/carrier.ts';
import { GEN_AI, inSpan, markFailed, SpanKind, spanCarrier } from '../telemetry/spans.ts';
import { serveA2A } from './a2a-route.ts';
import {
  type Admitted,
  type AdmittedA2A,
  type AdmittedMessage,
  type AdmittedTasks,
  fail,
  Ingress,
  type IngressDeps,
  MAX_BODY_BYTES,
  type Reply,
} from './admit.ts';
import { ConnectionGuard, DEFAULT_LIMITS, type GuardLimits, sourceOf } from './guard.ts';
import { IngressMetrics } from './metrics.ts';

/**
 * The external ingress of living agents, served by the orchestrator's leader on its own port (docs/runtime-model.md § Living agents):
 * `POST /v1/agents/{role}/messages` queues the body as a message the model reads (enqueue_message);
 * `POST /v1/agents/{role}/wake` only wakes the agent (wake_hint: the body is never kept nor shown).
 * A bearer capability token admits each request; the labels (origin, surface, admission, authority)
 * come from the token and the route, never from the body. Anyone may connect, so what a caller can
 * make it hold is bounded before the token is known: connections (in all, per source), the time to
 * send a head and a body, and failed authentications per source; a body is read only once admitted.
 */

export { MAX_BODY_BYTES } from './admit.ts';

export interface IngressLimits extends GuardLimits {
  /** A request's head must arrive within this. */
  headersTimeoutMs: number;
  /** An admitted request's body must arrive within this. */
  bodyTimeoutMs: number;
  /** Undelivered messages an agent may hold; past it the ingress answers 429. */
  maxUndelivered: number;
}

export const DEFAULT_INGRESS_LIMITS: IngressLimits = {
  ...DEFAULT_LIMITS,
  headersTimeoutMs: 10_000,
  bodyTimeoutMs: 10_000,
  maxUndelivered: 1000,
};

export interface IngressServerOptions extends Omit<IngressDeps, 'limits' | 'metrics' | 'maxUndelivered'> {
  port: number;
  host?: string;
  limits?: Partial<IngressLimits>;
  /** Prometheus registry for the ingress's metrics (none: in-process figures only). */
  registry?: Registry;
  /**
   * Pages served under CONSOLE_BASE (the orchestrator's console, src/console), made once the server
   * is: they check their own sessions, and report a failed sign-in as a failed authentication of its
   * source (the same limit as a wrong bearer token). The standby's 503 and that limit come first.
   */
  console?: (hooks: { failed(req: IncomingMessage): void }) => Promise<MountedPages>;
}

export { CONSOLE_BASE };

export interface MountedPages {
  /** Answers a request for `path`, the part of the URL's path after CONSOLE_BASE. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
  close(): Promise<void>;
}

export interface IngressServer {
  server: Server;
  port: number;
  /** In-process figures (body bytes read, refusals by reason), as the metrics count them. */
  metrics: IngressMetrics;
  connections(): number;
  /** Connections with a request in flight. */
  inFlight(): number;
  close(): Promise<void>;
}

const header = (req: IncomingMessage, name: string) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** The caller's W3C trace context (`traceparent`, `tracestate` headers); a malformed one is ignored. */
const callerTrace = (req: IncomingMessage) =>
  parseCarrier({ traceparent: header(req, 'traceparent'), tracestate: header(req, 'tracestate') });

/**
 * An admitted request's delivery in its server span (HTTP semantic conventions), under the caller's
 * trace when it sent one; the queued message carries this span on to the turn it wakes.
 */
function deliverInSpan(ingress: Ingress, a: AdmittedMessage, body: Buffer, caller: TraceCarrier | undefined) {
  const route = `/v1/agents/{role}/${a.mode === 'enqueue_message' ? 'messages' : 'wake'}`;
  return inSpan(
    `POST ${route}`,
    {
      kind: SpanKind.SERVER,
      parent: contextFrom(caller),
      attributes: { 'http.request.method': 'POST', 'http.route': route, [GEN_AI.agentName]: a.role },
    },
    async (span) => {
      const r = await ingress.deliver(a, body, spanCarrier(span));
      span.setAttribute('http.response.status_code', r.status);
      if (r.status >= 500) markFailed(span, String(r.status));
      return r;
    },
  );
}

/** An operator's request on an agent's tasks, in its server span. */
function tasksInSpan(ingress: Ingress, a: AdmittedTasks, caller: TraceCarrier | undefined) {
  const route = `/v1/agents/{role}/tasks${a.id === undefined ? '' : '/{id}'}`;
  return inSpan(
    `${a.method} ${route}`,
    {
      kind: SpanKind.SERVER,
      parent: contextFrom(caller),
      attributes: { 'http.request.method': a.method, 'http.route': route, [GEN_AI.agentName]: a.role },
    },
    async (span) => {
      const r = await ingress.tasks(a);
      span.setAttribute('http.response.status_code', r.status);
      return r;
    },
  );
}

/** An admitted A2A request in its server span (JSON-RPC, or the card). */
function a2aInSpan(
  deps: IngressDeps,
  a: AdmittedA2A,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | undefined,
  caller: TraceCarrier | undefined,
) {
  const route = a.mode === 'a2a' ? 'POST /a2a/{role}' : 'GET /a2a/{role}/.well-known/agent-card.json';
  return inSpan(
    route,
    {
      kind: SpanKind.SERVER,
      parent: contextFrom(caller),
      attributes: {
        'http.request.method': a.mode === 'a2a' ? 'POST' : 'GET',
        'http.route': route.split(' ')[1],
        [GEN_AI.agentName]: a.role,
      },
    },
    async (span) => {
      const r = await serveA2A(deps, a, req, res, body);
      span.setAttribute('http.response.status_code', r?.status ?? 200);
      return r;
    },
  );
}

/** Serves the ingress on `port` (0: any free port). Tokens never reach a log line. */
export async function startIngressServer(d: IngressServerOptions): Promise<IngressServer> {
  const limits: IngressLimits = { ...DEFAULT_INGRESS_LIMITS, ...d.limits };
  const metrics = new IngressMetrics(d.registry, () => guard.size);
  const guard = new ConnectionGuard(limits, (why) => metrics.refuse(why));
  const deps = { ...d, limits, metrics, maxUndelivered: limits.maxUndelivered };
  const ingress = new Ingress(deps);
  const pages = d.console
    ? await d.console({ failed: (req) => ingress.authFailed(sourceOf(req.socket.remoteAddress)) })
    : undefined;
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.headersTimeoutMs + limits.bodyTimeoutMs,
      // How often Node enforces the two above (its default, 30 s, would let a slow head live that much longer).
      connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.headersTimeoutMs / 2))),
      keepAliveTimeout: 5_000,
      maxHeaderSize: 16 * 1024,
    },
    (req, res) => {
      const socket = req.socket;
      guard.mark(socket, true);
      res.once('close', () => guard.mark(socket, false));
      const logged = (r: Reply & { who?: Admitted }) => {
        metrics.answered(r.status);
        const line = {
          event_type: 'ingress_request',
          status: r.status,
          role: r.who?.role,
          mode: r.who?.mode,
          token_name: r.who?.token.name,
        };
        // Refusals before a token is known are logged at debug: a flood must not become a log flood.
        if (r.who || r.status < 400) d.log.info(line, `ingress ${r.status}`);
        else d.log.debug(line, `ingress ${r.status}`);
        send(res, r);
      };
      const path = pages ? new URL(req.url ?? '/', 'http://ingress').pathname : '';
      if (pages && (path === CONSOLE_BASE || path.startsWith(`${CONSOLE_BASE}/`))) {
        // A kept-alive connection asks again: the standby's 503 and the failure limit, per request.
        const early = ingress.early(sourceOf(socket.remoteAddress));
        if (early) return logged(refused(req, early));
        if (path === CONSOLE_BASE) {
          res.writeHead(308, { location: `${CONSOLE_BASE}/` });
          return void res.end();
        }
        return void pages.handle(req, res, path.slice(CONSOLE_BASE.length));
      }
      const a = ingress.admit({
        method: req.method ?? 'GET',
        url: req.url ?? '/',
        source: sourceOf(socket.remoteAddress),
        authorization: header(req, 'authorization'),
        idempotencyKey: header(req, 'idempotency-key'),
        contentType: header(req, 'content-type'),
        ...(req.headers['content-length'] !== undefined
          ? { contentLength: Number(req.headers['content-length']) }
          : {}),
      });
      if ('status' in a) return logged(refused(req, a));
      if (a.mode === 'tasks') {
        // A task request has no body: whatever came is dropped (a large one closes the connection).
        return void tasksInSpan(ingress, a, callerTrace(req))
          .then((r) => logged({ ...refused(req, r), who: a }))
          .catch((e: unknown) => {
            d.log.error({ event_type: 'ingress_failed', error: String(e) }, 'ingress request failed');
            logged({ ...fail(503, 'the agent store is unavailable; retry'), who: a });
          });
      }
      const storeDown = (e: unknown) => {
        d.log.error({ event_type: 'ingress_failed', error: String(e) }, 'ingress request failed');
        if (!res.headersSent) logged({ ...fail(503, 'the agent store is unavailable; retry'), who: a });
        else res.end();
      };
      if (a.mode === 'a2a_card')
        return void a2aInSpan(deps, a, req, res, undefined, callerTrace(req))
          .then((r) => r && logged({ ...refused(req, r), who: a }))
          .catch(storeDown);
      readBody(req, limits.bodyTimeoutMs, metrics)
        .then(async (body) => {
          if (body === 'gone') return;
          if (body === 'too_big')
            return logged({ ...fail(413, `the body is over ${MAX_BODY_BYTES} bytes`), close: true, who: a });
          if (body === 'late') {
            metrics.refuse('deadline');
            return logged({
              ...fail(408, `the body took over ${limits.bodyTimeoutMs} ms`),
              close: true,
              who: a,
            });
          }
          if (!('key' in a)) {
            const r = await a2aInSpan(deps, a, req, res, body, callerTrace(req));
            if (r) return logged({ ...r, who: a });
            metrics.answered(200);
            return d.log.info(
              {
                event_type: 'ingress_request',
                status: 200,
                role: a.role,
                mode: a.mode,
                token_name: a.token.name,
              },
              'ingress 200',
            );
          }
          logged({ ...(await deliverInSpan(ingress, a, body, callerTrace(req))), who: a });
        })
        .catch((e: unknown) => {
          // A data error is the request's (400), never a reason to retry; anything else is the store's.
          const code = String((e as { code?: unknown }).code ?? '');
          if (code.startsWith('22'))
            return logged({ ...fail(400, `the store refused the request: ${(e as Error).message}`), who: a });
          d.log.error({ event_type: 'ingress_failed', error: String(e) }, 'ingress request failed');
          if (!res.headersSent)
            logged({
              ...fail(503, 'the agent store is unavailable; retry with the same Idempotency-Key'),
              who: a,
            });
        });
    },
  );
  // The guard decides before Node's HTTP layer sees a connection: a refused one never gets a parser,
  // its buffers and timers (a flood's refusals would otherwise be the most of what it costs).
  const http = server.listeners('connection') as ((s: Socket) => void)[];
  server.removeAllListeners('connection');
  let answering = 0;
  server.on('connection', (s: Socket) => {
    // A standby, or a source past its failed authentications, is answered from its address: the
    // first bytes of its request are awaited (a reply before them confuses clients), never parsed.
    const early = ingress.early(sourceOf(s.remoteAddress));
    if (!early) {
      if (guard.accept(s)) for (const l of http) l.call(server, s);
      return;
    }
    if (answering >= limits.maxConnections) return void s.destroy();
    answering++;
    s.once('close', () => answering--);
    s.on('error', () => undefined);
    const bye = setTimeout(() => s.destroy(), limits.headersTimeoutMs);
    s.once('close', () => clearTimeout(bye));
    s.once('data', () => {
      s.pause();
      // Closed once the reply is written: the request came in its first bytes, so nothing is left
      // unread to reset the connection under the reply (a longer one is cut, as it deserves).
      s.end(rawReply(early), () => s.destroy());
    });
  });
  // A malformed or late head: 400, 408 or 431 (as Node answers them), counted, then closed.
  server.on('clientError', (err: NodeJS.ErrnoException, s: Socket) => {
    const late = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    if (late) metrics.refuse('deadline');
    // Node's own check: no reply of ours is under way on this socket (internal, but what it tests too).
    if (s.writable && !(s as Socket & { _httpMessage?: unknown })._httpMessage) {
      const status = late ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
      const body = JSON.stringify({
        error: late ? 'the request took too long' : `malformed request (${err.code ?? 'bad HTTP'})`,
      });
      s.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    }
    s.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(d.port, d.host ?? '0.0.0.0', () => resolve());
  });
  const addr = server.address();
  return {
    server,
    port: typeof addr === 'object' && addr ? addr.port : d.port,
    metrics,
    connections: () => guard.size,
    inFlight: () => guard.inFlight,
    close: async () => {
      await pages?.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/**
 * A request refused from its head: its body is never held. A small one (declared, up to the cap) is
 * read and dropped, so the reply reaches a client still sending and a keep-alive connection stays
 * usable; a larger or undeclared one is not read at all: the connection closes after the reply.
 */
function refused(req: IncomingMessage, r: Reply): Reply {
  const declared = req.headers['content-length'];
  if (
    declared === undefined
      ? req.headers['transfer-encoding'] !== undefined
      : Number(declared) > MAX_BODY_BYTES
  )
    return { ...r, close: true };
  req.removeAllListeners('data');
  req.on('data', () => undefined);
  req.resume();
  return r;
}

/** A reply as bytes, for a connection Node's HTTP layer never parsed (it closes after). */
function rawReply(r: Reply): string {
  const body = JSON.stringify(r.body);
  const headers = Object.entries({
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
    ...(r.headers ?? {}),
  })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status]}\r\n${headers}\r\n${body}`;
}

function send(res: ServerResponse, r: Reply): void {
  if (res.headersSent) return;
  res
    .writeHead(r.status, {
      'content-type': 'application/json',
      ...(r.close ? { connection: 'close' } : {}),
      ...(r.headers ?? {}),
    })
    .end(JSON.stringify(r.body));
}

/**
 * An admitted request's body, held up to the cap and no longer than `deadlineMs`: 'too_big' past the
 * cap, 'late' past the deadline (either reply closes the connection), 'gone' if the client left.
 */
function readBody(
  req: IncomingMessage,
  deadlineMs: number,
  metrics: IngressMetrics,
): Promise<Buffer | 'too_big' | 'late' | 'gone'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (v: Buffer | 'too_big' | 'late' | 'gone') => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (typeof v === 'string') req.removeAllListeners('data');
      resolve(v);
    };
    const timer = setTimeout(() => finish('late'), deadlineMs);
    req.on('data', (c: Buffer) => {
      if (done) return;
      size += c.length;
      if (size > MAX_BODY_BYTES) return finish('too_big');
      metrics.bodyBytes += c.length;
      chunks.push(c);
    });
    req.on('end', () => finish(Buffer.concat(chunks)));
    // The client went away mid-body: nobody to answer.
    req.on('error', () => finish('gone'));
  });
}
