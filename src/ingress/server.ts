import { createServer, type IncomingMessage, type Server } from 'node:http';
import { z } from 'zod';
import type { Logger } from '../common/logger.ts';
import { labelsOf, PRIVILEGED_LABELS } from '../life/labels.ts';
import type { Enqueued, LifeStore } from '../life/store.ts';
import { type Bucket, take } from './rate-limit.ts';
import { findToken, type Mode, type TokenEntry } from './tokens.ts';

/**
 * The external ingress of living agents, served by the orchestrator on its own port (seed 003):
 * `POST /v1/agents/{role}/messages` queues the body as a message the model reads (enqueue_message);
 * `POST /v1/agents/{role}/wake` only wakes the agent (wake_hint: the body is never kept nor shown).
 * A bearer capability token admits each request; the labels (origin, surface, admission, authority)
 * come from the token and the route, never from the body.
 */

export const MAX_BODY_BYTES = 64 * 1024;
const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,200}$/;

const MessageBody = z.union([
  z.strictObject({ text: z.string().min(1).max(60_000) }),
  z.strictObject({ data: z.unknown().refine((v) => v !== undefined, 'data is required') }),
]);

export interface IngressDeps {
  instance: string;
  life: Pick<LifeStore, 'enqueue'>;
  tokens: () => TokenEntry[];
  /** Whether an agent of that role exists (registered). */
  knows: (role: string) => Promise<boolean>;
  /** Rings the agent's wake doorbell after its message is queued. */
  ring: (role: string) => void;
  log: Logger;
  now?: () => number;
}

export interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers?: Record<string, string>;
}

const fail = (status: number, error: string, headers?: Record<string, string>): Reply => ({
  status,
  body: { error },
  ...(headers ? { headers } : {}),
});

/** The request as the handler needs it (so it can be decided without a socket). */
export interface IngressRequest {
  method: string;
  path: string;
  authorization?: string;
  idempotencyKey?: string;
  body: string;
}

/** Decides and acts on one request; never throws for a bad request (only a store failure throws). */
export class Ingress {
  private readonly d: IngressDeps;
  private readonly buckets = new Map<string, Bucket>();
  constructor(d: IngressDeps) {
    this.d = d;
  }

  async handle(r: IngressRequest): Promise<Reply & { token?: string; mode?: Mode; role?: string }> {
    const m = /^\/v1\/agents\/([^/]+)\/(messages|wake)$/.exec(r.path);
    if (!m) return fail(404, 'not found: POST /v1/agents/{role}/messages or /v1/agents/{role}/wake');
    if (r.method !== 'POST') return { ...fail(405, 'use POST'), headers: { allow: 'POST' } };
    const role = decodeURIComponent(m[1]!);
    const mode: Mode = m[2] === 'messages' ? 'enqueue_message' : 'wake_hint';
    const bearer = /^Bearer\s+(\S+)$/i.exec(r.authorization ?? '')?.[1];
    const token = bearer ? findToken(this.d.tokens(), bearer) : undefined;
    if (!token)
      return fail(401, 'unknown or missing token (Authorization: Bearer <token>)', {
        'www-authenticate': 'Bearer',
      });
    // Who asked, for the log line (never the token itself).
    return { ...(await this.admitted(r, token, role, mode)), token: token.name, mode, role };
  }

  /** The rest of a request whose token is known: its scope, rate, key and body, then the queueing. */
  private async admitted(r: IngressRequest, token: TokenEntry, role: string, mode: Mode): Promise<Reply> {
    if (token.role !== role) return fail(403, `this token is for agent ${token.role}, not ${role}`);
    if (!token.modes.includes(mode))
      return fail(403, `this token may not ${mode} (its scope: ${token.modes.join(', ')})`);
    const now = (this.d.now ?? Date.now)();
    const key = `${token.role}/${token.name}`;
    const t = take(this.buckets.get(key), now, token.ratePerMinute);
    this.buckets.set(key, t.bucket);
    if (!t.ok)
      return fail(429, `rate limit: ${token.ratePerMinute} requests a minute for this token`, {
        'retry-after': String(Math.ceil(t.retryAfterMs / 1000)),
      });
    if (!r.idempotencyKey || !IDEMPOTENCY_KEY.test(r.idempotencyKey))
      return fail(400, 'an Idempotency-Key header of 1-200 [A-Za-z0-9._:-] is required');
    let json: unknown;
    if (r.body.trim() || mode === 'enqueue_message') {
      try {
        json = JSON.parse(r.body);
      } catch (e) {
        return fail(400, `the body is not JSON: ${(e as Error).message}`);
      }
      if (json && typeof json === 'object' && !Array.isArray(json)) {
        const bad = PRIVILEGED_LABELS.find((k) => Object.hasOwn(json as object, k));
        if (bad) return fail(403, `"${bad}" is set by the ingress, never by a request: remove it`);
      }
    }
    let text: string | undefined;
    if (mode === 'enqueue_message') {
      const b = MessageBody.safeParse(json);
      if (!b.success) return fail(400, 'the body must be {"text": "..."} or {"data": <any JSON>}');
      text = 'text' in b.data ? b.data.text : JSON.stringify(b.data.data);
    }
    if (!(await this.d.knows(role))) return fail(404, `no agent ${role}`);
    const kind = mode === 'enqueue_message' ? 'message' : 'wake';
    const route = mode === 'enqueue_message' ? 'messages' : 'wake';
    const q: Enqueued = await this.d.life.enqueue({
      instance: this.d.instance,
      role,
      key: r.idempotencyKey,
      kind,
      ...(text !== undefined ? { body: text } : {}),
      labels: labelsOf(token.origin, kind, `POST /v1/agents/${role}/${route}`, `token ${token.name}`),
    });
    if (q.kind === 'stopped') return fail(409, `agent ${role} is stopped: nothing was queued`);
    if (q.kind === 'queued') this.d.ring(role);
    return { status: q.kind === 'queued' ? 202 : 200, body: { status: q.kind, id: q.id } };
  }
}

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Past the cap the rest is read and dropped (so the client gets its 413), up to 16 times the cap.
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 16 * MAX_BODY_BYTES) req.destroy();
      else if (size <= MAX_BODY_BYTES) chunks.push(c);
    });
    req.on('end', () => resolve(size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const header = (req: IncomingMessage, name: string) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** Serves the ingress on `port` (0: any free port). Tokens never reach a log line. */
export async function startIngressServer(
  d: IngressDeps & { port: number; host?: string },
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const ingress = new Ingress(d);
  const server = createServer((req, res) => {
    const send = (r: Reply) => {
      res
        .writeHead(r.status, { 'content-type': 'application/json', ...(r.headers ?? {}) })
        .end(JSON.stringify(r.body));
    };
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    readBody(req)
      .then(async (body) => {
        if (body === undefined) return send(fail(413, `the body is over ${MAX_BODY_BYTES} bytes`));
        const r = await ingress.handle({
          method: req.method ?? 'GET',
          path,
          authorization: header(req, 'authorization'),
          idempotencyKey: header(req, 'idempotency-key'),
          body,
        });
        d.log.info(
          {
            event_type: 'ingress_request',
            status: r.status,
            role: r.role,
            mode: r.mode,
            token_name: r.token,
          },
          `ingress ${r.status}`,
        );
        send(r);
      })
      .catch((e: unknown) => {
        d.log.error({ event_type: 'ingress_failed', error: String(e) }, 'ingress request failed');
        if (!res.headersSent)
          send(fail(503, 'the agent store is unavailable; retry with the same Idempotency-Key'));
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(d.port, d.host ?? '0.0.0.0', () => resolve());
  });
  const addr = server.address();
  return {
    server,
    port: typeof addr === 'object' && addr ? addr.port : d.port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
