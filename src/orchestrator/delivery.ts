import type { DeliveryEvent } from '../bus/events.ts';
import { toolOutcomeSubject } from '../bus/subjects.ts';
import { NATS_CALLBACK } from '../common/callback.ts';
import type { Logger } from '../common/logger.ts';
import { deliveryKey, signedHeaders } from '../ingress/signature.ts';
import { isFinal, type Outcome } from '../life/outcome.ts';
import type { Reply, ReplyStore } from '../life/replies.ts';
import { lifeActorOf } from '../state/ids.ts';

/**
 * Delivery to whoever asked (docs/agents.md § Delivery), in the orchestrator's leader: each pending
 * reply's outcome is followed (life/replies.ts) until it is final, then POSTed to its callback, signed
 * (ingress/signature.ts: Standard Webhooks), with the delivery id as its idempotency key, and retried
 * with backoff until a 2xx or `maxAttempts`. A replica takes an attempt by pushing its next time away
 * first, so two never send the same attempt. Delivery is its own channel: nothing of it goes into the
 * agent's turns or traces.
 */

export interface DeliverySettings {
  /** Attempts before a delivery is failed for good. */
  maxAttempts: number;
  /** The first retry's delay; each next one doubles, up to maxBackoffMs. */
  retryBaseMs: number;
  maxBackoffMs: number;
  /** One attempt's limit (connect, send, answer). */
  timeoutMs: number;
  /** A pass at least this often. */
  pollMs: number;
}

export const DEFAULT_DELIVERY: DeliverySettings = {
  maxAttempts: 8,
  retryBaseMs: 1000,
  maxBackoffMs: 300_000,
  timeoutMs: 10_000,
  pollMs: 1000,
};

/** The delay before attempt `attempt + 1` (pure): doubling from `base`, capped, with ±20% jitter of `r`. */
export function backoffMs(
  attempt: number,
  s: Pick<DeliverySettings, 'retryBaseMs' | 'maxBackoffMs'>,
  r = 0.5,
) {
  const d = Math.min(s.maxBackoffMs, s.retryBaseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(d * (0.8 + 0.4 * r));
}

/** When to look again at an outcome not yet final (pure): soon for a young one, at most once a minute. */
export const recheckMs = (ageMs: number) => Math.max(500, Math.min(60_000, Math.round(ageMs / 10)));

/** What the callback receives. */
export function deliveryBody(r: Reply, o: Outcome, atMs: number): string {
  return JSON.stringify({
    type: 'holt.outcome',
    delivery_id: r.id,
    instance: r.instance,
    agent: r.role,
    message_id: r.message_id,
    callback: r.callback,
    state: o.state,
    ...(o.text !== undefined ? { text: o.text } : {}),
    ...(o.itemId ? { work_item: o.itemId } : {}),
    at: new Date(atMs).toISOString(),
  });
}

type AttemptResult = { ok: true; status: number } | { ok: false; status: number | null; error: string };

export interface DeliveryDeps {
  replies: ReplyStore;
  /** The ingress's tokens (their hashes key the signatures). */
  tokens: () => { role: string; name: string; sha256: string }[];
  log: Logger;
  settings: DeliverySettings;
  serving?: () => boolean;
  publish?: (e: DeliveryEvent) => void;
  /** A NATS request (for `nats:<tool>` callbacks); its answer, or it throws. */
  request?: (
    subject: string,
    body: string,
    headers: Record<string, string>,
    timeoutMs: number,
  ) => Promise<string>;
  now?: () => number;
}

export class DeliveryLoop {
  readonly #d: DeliveryDeps;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  constructor(d: DeliveryDeps) {
    this.#d = d;
  }

  start(): void {
    this.poke();
  }

  /** A pass now (coalesced with one running), then at the poll. */
  poke(): void {
    if (this.#stopped || this.#running) return;
    clearTimeout(this.#timer);
    this.#running = this.pass()
      .catch((e: unknown) =>
        this.#d.log.warn({ event_type: 'delivery_pass_failed', error: String(e) }, 'delivery pass failed'),
      )
      .finally(() => {
        this.#running = undefined;
        if (!this.#stopped) this.#timer = setTimeout(() => this.poke(), this.#d.settings.pollMs);
      });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  /** Every due reply: looked at again later while its outcome is not final, else one attempt. */
  async pass(): Promise<void> {
    const d = this.#d;
    if (d.serving && !d.serving()) return;
    const now = d.now ?? Date.now;
    for (const r of await d.replies.due()) {
      const fixed = r.outcome as Outcome | null;
      const outcome = fixed ?? (await d.replies.outcome(r.message_id));
      if (!isFinal(outcome)) {
        await d.replies.later(r.id, recheckMs(now() - r.created_ms));
        continue;
      }
      const claimed = await d.replies.claim(r.id, outcome, d.settings.timeoutMs + 5000);
      if (claimed) await this.#attempt(claimed, (claimed.outcome as Outcome | null) ?? outcome);
    }
  }

  /** A POST to the callback's URL: a 2xx is delivered. */
  async #post(url: string, body: string, headers: Record<string, string>): Promise<AttemptResult> {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual', // a redirect is not followed: the URL registered is the only one called
        signal: AbortSignal.timeout(this.#d.settings.timeoutMs),
      });
      await res.body?.cancel().catch(() => undefined);
      return res.status >= 200 && res.status < 300
        ? { ok: true, status: res.status }
        : { ok: false, status: res.status, error: `the callback answered ${res.status}` };
    } catch (e) {
      const err = e as Error & { cause?: { code?: string } };
      return { ok: false, status: null, error: `${err.name}: ${err.cause?.code ?? err.message}` };
    }
  }

  /**
   * A NATS request to a tool service (a `nats:<tool>` callback), the same body and signed headers: its
   * answer is the acknowledgement (status 200), unless it is `{"ok": false}`; no responder or no
   * answer in time is retried.
   */
  async #request(subject: string, body: string, headers: Record<string, string>): Promise<AttemptResult> {
    const request = this.#d.request;
    if (!request) return { ok: false, status: null, error: 'no NATS connection to deliver on' };
    try {
      const answer = await request(subject, body, headers, this.#d.settings.timeoutMs);
      const refused = /^\s*\{/.test(answer) && (JSON.parse(answer) as { ok?: unknown }).ok === false;
      return refused
        ? { ok: false, status: 500, error: 'the tool service answered ok: false' }
        : { ok: true, status: 200 };
    } catch (e) {
      return { ok: false, status: null, error: `NATS: ${(e as Error).message}` };
    }
  }

  async #attempt(r: Reply, o: Outcome): Promise<void> {
    const d = this.#d;
    const now = (d.now ?? Date.now)();
    const token = d.tokens().find((t) => t.role === r.role && t.name === r.token_name);
    let result: AttemptResult;
    if (!token)
      result = { ok: false, status: null, error: `token ${r.token_name} was revoked: nothing signs it` };
    else {
      const body = deliveryBody(r, o, now);
      const headers = {
        'content-type': 'application/json',
        ...signedHeaders(deliveryKey(token.sha256), r.id, body, now),
      };
      const service = NATS_CALLBACK.exec(r.url)?.[1];
      result = service
        ? await this.#request(toolOutcomeSubject(r.instance, service), body, headers)
        : await this.#post(r.url, body, headers);
    }
    const retryable = token !== undefined && r.attempts < d.settings.maxAttempts;
    const retryAtMs = result.ok || !retryable ? null : now + backoffMs(r.attempts, d.settings, Math.random());
    await d.replies.attempted(r.id, result.ok ? result : { ...result, retryAtMs });
    const state = result.ok ? 'delivered' : retryAtMs === null ? 'failed' : 'retrying';
    const line = {
      event_type: `delivery_${state}`,
      delivery_id: r.id,
      role: r.role,
      callback: r.callback,
      attempt: r.attempts,
      status: result.status,
      ...(result.ok ? {} : { error: result.error }),
    };
    if (state === 'failed') d.log.warn(line, 'delivery failed for good');
    else d.log.info(line, `delivery ${state}`);
    d.publish?.({
      actor_id: lifeActorOf(r.instance, r.role),
      role: r.role,
      delivery_id: r.id,
      message_id: r.message_id,
      callback: r.callback,
      state,
      outcome: o.state,
      attempt: r.attempts,
      status: result.status,
      ...(result.ok ? {} : { error: result.error }),
      at_ms: now,
    });
  }
}
