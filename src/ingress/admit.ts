import { z } from 'zod';
import { findToken, MAX_PRIORITY, type Mode, type TokenEntry, tokenId } from '../access/tokens.ts';
import type { Logger } from '../common/logger.ts';
import { labelsOf, PRIVILEGED_LABELS } from '../life/labels.ts';
import type { Enqueued, EnqueueRequest, LifeStore } from '../life/store.ts';
import type { LifeTasks, Task } from '../life/tasks.ts';
import type { TraceCarrier } from '../telemetry/carrier.ts';
import type { IngressA2A } from './a2a-route.ts';
import { FailureLimiter, type GuardLimits } from './guard.ts';
import type { IngressMetrics } from './metrics.ts';
import { type Bucket, take } from './rate-limit.ts';
import { contentTypeProblem, routeOf, storable, textOf, tooDeep } from './request.ts';

/**
 * The ingress's decisions in two halves. `admit` reads only the request's head: the leader serves,
 * the route, the source's failed authentications, the token, its scope and rate, the idempotency key
 * and the declared type and size. Nothing of the body is read before it says yes. `deliver` then
 * checks the body (bytes, depth, JSON, schema, no labels) and queues it once per token and key.
 */

export const MAX_BODY_BYTES = 64 * 1024;
const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{1,200}$/;

const Priority = z.number().int().min(0).max(MAX_PRIORITY).optional();
/** Where the outcome goes: the name of one of the token's callbacks (never a URL). */
const ReplyTo = z.string().max(63).optional();
const MessageBody = z.union([
  z.strictObject({ text: z.string().min(1).max(60_000), priority: Priority, reply_to: ReplyTo }),
  z.strictObject({
    data: z.unknown().refine((v) => v !== undefined, 'data is required'),
    priority: Priority,
    reply_to: ReplyTo,
  }),
]);

export interface IngressDeps {
  instance: string;
  life: Pick<LifeStore, 'enqueue'>;
  /** The agents' tasks (waits, asynchronous calls): listed and cancelled by operator tokens. */
  tasks: Pick<LifeTasks, 'list' | 'cancel'>;
  tokens: () => TokenEntry[];
  /** Whether an agent of that role exists (registered). */
  knows: (role: string) => Promise<boolean>;
  /** Rings the agent's wake doorbell after its message is queued. */
  ring: (role: string) => void;
  log: Logger;
  now?: () => number;
  /** Whether this replica serves (the orchestrator's leader): a standby answers 503 to everything. */
  serving?: () => boolean;
  /** Undelivered messages an agent may hold before the ingress answers 429. */
  maxUndelivered: number;
  limits: GuardLimits;
  metrics: IngressMetrics;
  /** The agents over A2A (none: the A2A routes answer 404). */
  a2a?: IngressA2A;
}

export interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers?: Record<string, string>;
  /** Close the connection after the reply (its body was cut short). */
  close?: boolean;
}

export const fail = (status: number, error: string, headers?: Record<string, string>): Reply => ({
  status,
  body: { error },
  ...(headers ? { headers } : {}),
});

/** The request's head, all `admit` may look at. */
export interface Head {
  method: string;
  url: string;
  /** The source a limit counts (guard.ts sourceOf). */
  source: string;
  authorization?: string;
  idempotencyKey?: string;
  contentType?: string;
  /** The declared Content-Length, when there is one. */
  contentLength?: number;
}

/** A request whose head was admitted: whose it is and where it goes. */
export type Admitted =
  | { token: TokenEntry; role: string; mode: Mode; key: string }
  | { token: TokenEntry; role: string; mode: 'tasks'; method: 'GET' | 'DELETE'; id?: string }
  | { token: TokenEntry; role: string; mode: 'a2a' | 'a2a_card' };

/** An admitted message or wake hint (its body is read next). */
export type AdmittedMessage = Extract<Admitted, { key: string }>;
/** An admitted task request (it has no body). */
export type AdmittedTasks = Extract<Admitted, { mode: 'tasks' }>;
/** An admitted A2A request (its JSON-RPC body is read next) or card request. */
export type AdmittedA2A = Extract<Admitted, { mode: 'a2a' | 'a2a_card' }>;

const retryAfter = (ms: number) => ({ 'retry-after': String(Math.max(1, Math.ceil(ms / 1000))) });

/** The agent's tasks as the API shows them (life/tasks.ts). */
const taskView = (t: Task) => ({
  id: t.id,
  kind: t.kind,
  what: t.what,
  state: t.state,
  deadline: t.deadlineMs === null ? null : new Date(t.deadlineMs).toISOString(),
  created: new Date(t.createdMs).toISOString(),
  ...(t.itemId ? { work_item: t.itemId } : {}),
});

/** Decides and acts on requests; never throws for a bad request (only a store failure throws). */
export class Ingress {
  private readonly deps: IngressDeps;
  private readonly buckets = new Map<string, Bucket>();
  private readonly failures: FailureLimiter;
  constructor(d: IngressDeps) {
    this.deps = d;
    this.failures = new FailureLimiter(d.limits);
  }

  /**
   * What a source gets whatever it asks: 503 from a standby, 429 past its failed authentications.
   * Decided from the address alone, so the server can answer it without parsing the request.
   */
  early(source: string): Reply | undefined {
    if (this.deps.serving && !this.deps.serving()) {
      this.deps.metrics.refuse('standby');
      return fail(503, 'this orchestrator is a standby; retry (the leader serves)', retryAfter(1000));
    }
    const blocked = this.failures.blockedFor(source, (this.deps.now ?? Date.now)());
    if (blocked) {
      this.deps.metrics.refuse('auth_limited');
      return fail(429, `too many failed authentications from ${source}; retry later`, retryAfter(blocked));
    }
    return undefined;
  }

  /** A failed authentication elsewhere on the port (the console's sign-in): counted like a wrong token. */
  authFailed(source: string): void {
    this.failures.fail(source, (this.deps.now ?? Date.now)());
  }

  /** From the head alone: a refusal (its body never read), or who may send the body. */
  admit(h: Head): Reply | Admitted {
    const early = this.early(h.source);
    if (early) return early;
    const route = routeOf(h.method, h.url);
    if (!route.ok)
      return {
        ...fail(route.status, route.error),
        ...(route.allow ? { headers: { allow: route.allow } } : {}),
      };
    const r = route.value;
    const { role, mode } = r;
    const now = (this.deps.now ?? Date.now)();
    const bearer = /^Bearer\s+(\S+)$/i.exec(h.authorization ?? '')?.[1];
    const token = bearer ? findToken(this.deps.tokens(), bearer) : undefined;
    if (!token) {
      this.failures.fail(h.source, now);
      return fail(401, 'unknown or missing token (Authorization: Bearer <token>)', {
        'www-authenticate': 'Bearer',
      });
    }
    if (token.role !== role) return fail(403, `this token is for agent ${token.role}, not ${role}`);
    if (mode === 'tasks' && token.origin !== 'operator')
      return fail(403, `an agent's tasks are its operators': this token's origin is ${token.origin}`);
    // A2A is messages: a token that may not enqueue them may still read the card.
    const needs = mode === 'a2a' ? 'enqueue_message' : mode;
    if (needs !== 'tasks' && needs !== 'a2a_card' && !token.modes.includes(needs))
      return fail(403, `this token may not ${needs} (its scope: ${token.modes.join(', ')})`);
    const bucketKey = `${token.role}/${token.name}`;
    const t = take(this.buckets.get(bucketKey), now, token.ratePerMinute);
    this.buckets.set(bucketKey, t.bucket);
    if (!t.ok)
      return fail(
        429,
        `rate limit: ${token.ratePerMinute} requests a minute for this token`,
        retryAfter(t.retryAfterMs),
      );
    if (r.mode === 'tasks')
      return { token, role, mode: 'tasks', method: r.method, ...(r.id !== undefined ? { id: r.id } : {}) };
    if (r.mode === 'a2a_card') return { token, role, mode: r.mode };
    if (r.mode === 'a2a') {
      const badType = contentTypeProblem(h.contentType);
      if (badType) return fail(415, badType);
      if (h.contentLength !== undefined && h.contentLength > MAX_BODY_BYTES)
        return fail(413, `the body is over ${MAX_BODY_BYTES} bytes`);
      return { token, role, mode: r.mode };
    }
    if (!h.idempotencyKey || !IDEMPOTENCY_KEY.test(h.idempotencyKey))
      return fail(400, 'an Idempotency-Key header of 1-200 [A-Za-z0-9._:-] is required');
    const badType = contentTypeProblem(h.contentType);
    if (badType) return fail(415, badType);
    if (h.contentLength !== undefined && h.contentLength > MAX_BODY_BYTES)
      return fail(413, `the body is over ${MAX_BODY_BYTES} bytes`);
    return { token, role, mode: r.mode, key: h.idempotencyKey };
  }

  /**
   * An operator's request on the agent's tasks: the list, one task, or a cancel (the agent's doorbell
   * rung after it, so its next pass tells the turn and kills a background command at once).
   */
  async tasks(a: AdmittedTasks): Promise<Reply> {
    const { instance } = this.deps;
    if (!(await this.deps.knows(a.role))) return fail(404, `no agent ${a.role}`);
    if (a.method === 'DELETE') {
      const c = await this.deps.tasks.cancel(instance, a.role, a.id ?? '', `operator token ${a.token.name}`);
      if (c.kind === 'ambiguous')
        return fail(409, `${a.id} is the start of ${c.ids.length} tasks' ids: give more of it`);
      if (c.kind === 'not_found') return fail(404, `agent ${a.role} has no open task ${a.id}`);
      this.deps.ring(a.role);
      return { status: 202, body: { status: 'cancelling', task: taskView(c.task) } };
    }
    const all = (await this.deps.tasks.list(instance, a.role)).map(taskView);
    if (a.id === undefined) return { status: 200, body: { tasks: all } };
    const one = all.filter((t) => t.id.startsWith(a.id ?? ''));
    if (one.length === 1) return { status: 200, body: { task: one[0] } };
    return one.length
      ? fail(409, `${a.id} is the start of ${one.length} tasks' ids: give more of it`)
      : fail(404, `agent ${a.role} has no open task ${a.id}`);
  }

  /** The body of an admitted request: checked, then queued once per token and key, with the trace
   * context the turn it wakes is to continue (the request's span's). */
  async deliver(a: AdmittedMessage, body: Buffer, trace?: TraceCarrier): Promise<Reply> {
    const { token, role, mode } = a;
    const text = textOf(body);
    if (!text.ok) return fail(text.status, text.error);
    let json: unknown;
    if (text.value.trim() || mode === 'enqueue_message') {
      if (tooDeep(text.value)) return fail(400, 'the body nests JSON deeper than 32 levels');
      try {
        json = JSON.parse(text.value);
      } catch (e) {
        return fail(400, `the body is not JSON: ${(e as Error).message}`);
      }
      if (json && typeof json === 'object' && !Array.isArray(json)) {
        const bad = PRIVILEGED_LABELS.find((k) => Object.hasOwn(json as object, k));
        if (bad) return fail(403, `"${bad}" is set by the ingress, never by a request: remove it`);
      }
    }
    let message: string | undefined;
    let priority = 0;
    let reply: EnqueueRequest['reply'];
    if (mode === 'enqueue_message') {
      const b = MessageBody.safeParse(json);
      if (!b.success)
        return fail(
          400,
          `the body must be {"text": "..."} or {"data": <any JSON>}, with an optional "priority" of 0-${MAX_PRIORITY} and "reply_to" (a callback of the token, by name)`,
        );
      message = 'text' in b.data ? b.data.text : JSON.stringify(b.data.data);
      priority = b.data.priority ?? 0;
      const name = b.data.reply_to;
      if (name !== undefined) {
        const cb = token.callbacks.find((c) => c.name === name);
        if (!cb)
          return fail(
            400,
            `this token has no callback named ${JSON.stringify(name)} (${token.callbacks.length ? `its callbacks: ${token.callbacks.map((c) => c.name).join(', ')}` : 'it registered none'})`,
          );
        reply = { tokenName: token.name, callback: cb.name, url: cb.url };
      }
      if (priority > token.maxPriority)
        return fail(
          403,
          `this token may send priority up to ${token.maxPriority}, not ${priority} (its maxPriority)`,
        );
      if (!storable(message)) return fail(400, 'the text holds a NUL character or a lone surrogate');
    }
    if (!(await this.deps.knows(role))) return fail(404, `no agent ${role}`);
    const kind = mode === 'enqueue_message' ? 'message' : 'wake';
    const route = mode === 'enqueue_message' ? 'messages' : 'wake';
    const q: Enqueued = await this.deps.life.enqueue({
      instance: this.deps.instance,
      role,
      key: a.key,
      scope: tokenId(token),
      maxUndelivered: this.deps.maxUndelivered,
      kind,
      ...(message !== undefined ? { body: message } : {}),
      labels: {
        ...labelsOf(token.origin, kind, `POST /v1/agents/${role}/${route}`, `token ${token.name}`),
        ...(priority ? { priority } : {}),
      },
      ...(trace ? { trace } : {}),
      ...(reply ? { reply } : {}),
    });
    if (q.kind === 'stopped') return fail(409, `agent ${role} is stopped: nothing was queued`);
    if (q.kind === 'full') {
      this.deps.metrics.refuse('backlog_full');
      return fail(
        429,
        `agent ${role} already has ${q.undelivered} undelivered messages (the cap); retry later`,
        retryAfter(30_000),
      );
    }
    if (q.kind === 'queued') this.deps.ring(role);
    return { status: q.kind === 'queued' ? 202 : 200, body: { status: q.kind, id: q.id } };
  }
}
