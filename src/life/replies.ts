import type pg from 'pg';
import { z } from 'zod';
import { type Hop, hopOutcome, type Outcome } from './outcome.ts';

/**
 * Deliveries to whoever asked (`holt.message_replies`, migration replies): a message that named one of
 * its token's callbacks has a reply row, written with it (enqueue.ts). Its outcome is followed from the
 * turn it was delivered to (outcome.ts); once final, the orchestrator's delivery loop
 * (src/orchestrator/delivery.ts) sends it, fixed at the first attempt so every retry sends the same
 * body, and records each attempt here.
 */

/** A chain longer than this (a turn that waited, woke, waited...) is still working. */
const MAX_HOPS = 16;

const num = z.coerce.number();
export const ReplyRow = z.object({
  id: z.uuid(),
  instance: z.string(),
  role: z.string(),
  message_id: z.coerce.string(),
  token_name: z.string(),
  callback: z.string(),
  url: z.string(),
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: num,
  next_ms: num,
  outcome: z.unknown().nullable(),
  last_status: num.nullable(),
  last_error: z.string().nullable(),
  created_ms: num,
  delivered_ms: num.nullable(),
});
export type Reply = z.infer<typeof ReplyRow>;

const COLS = `id, instance, role, message_id, token_name, callback, url, status, attempts, outcome, last_status,
  last_error, (EXTRACT(EPOCH FROM next_at) * 1000)::bigint AS next_ms,
  (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS created_ms,
  (EXTRACT(EPOCH FROM delivered_at) * 1000)::bigint AS delivered_ms`;

const HopRow = z.object({
  status: z.enum(['queued', 'running', 'done', 'failed']).nullable(),
  payload: z.string().nullable(),
  error: z.string().nullable(),
  item: z
    .object({
      id: z.uuid(),
      state: z.enum(['open', 'completed', 'cancelled']),
      report: z.string().nullable(),
      operator_wait: z.string().nullable(),
    })
    .nullable(),
  wait: z
    .object({
      kind: z.enum(['timer', 'message', 'operator']),
      on_what: z.string(),
      state: z.enum(['waiting', 'resolved', 'timed_out', 'cancelled']),
      turn_id: z.uuid().nullable(),
    })
    .nullable(),
});

export class ReplyStore {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** What became of a message: submitted until a turn got it, then followed turn by turn. */
  async outcome(messageId: string): Promise<Outcome> {
    const m = await this.pool.query<{ turn_id: string | null }>(
      'SELECT turn_id FROM holt.agent_messages WHERE id = $1',
      [messageId],
    );
    let turnId = m.rows[0]?.turn_id ?? null;
    if (!turnId) return { state: 'submitted' };
    for (let hops = 0; hops < MAX_HOPS; hops++) {
      const o = hopOutcome(await this.#hop(turnId));
      if (!('next' in o)) return o;
      turnId = o.next;
    }
    return { state: 'working', turnId };
  }

  async #hop(turnId: string): Promise<Hop> {
    const r = await this.pool.query(
      `SELECT t.status, t.result->>'payload' AS payload, t.error,
         (SELECT json_build_object('id', i.id, 'state', i.state, 'report', i.report, 'operator_wait',
            (SELECT w.on_what FROM holt.agent_waits w
             WHERE w.item_id = i.id AND w.state = 'waiting' AND w.kind = 'operator' LIMIT 1))
          FROM holt.work_items i WHERE i.created_by_turn = $1 ORDER BY i.created_at LIMIT 1) AS item,
         (SELECT json_build_object('kind', w.kind, 'on_what', w.on_what, 'state', w.state, 'turn_id', w.turn_id)
          FROM holt.agent_waits w WHERE w.set_by_turn = $1 ORDER BY w.created_at DESC LIMIT 1) AS wait
       FROM (SELECT 1) one LEFT JOIN holt.agent_turns t ON t.turn_id = $1`,
      [turnId],
    );
    const h = HopRow.parse(r.rows[0]);
    return {
      turnId,
      turn: h.status ? { status: h.status, summary: h.payload ?? '', error: h.error } : null,
      item: h.item
        ? {
            id: h.item.id,
            state: h.item.state,
            report: h.item.report,
            ...(h.item.operator_wait !== null ? { operatorWait: h.item.operator_wait } : {}),
          }
        : null,
      wait: h.wait
        ? { kind: h.wait.kind, on: h.wait.on_what, state: h.wait.state, turnId: h.wait.turn_id }
        : null,
    };
  }

  /** Pending replies whose next attempt is due, the oldest first. */
  async due(limit = 50): Promise<Reply[]> {
    const r = await this.pool.query(
      `SELECT ${COLS} FROM holt.message_replies WHERE status = 'pending' AND next_at <= now()
       ORDER BY next_at LIMIT $1`,
      [limit],
    );
    return r.rows.map((x) => ReplyRow.parse(x));
  }

  /** When the next pending reply is due (ms), or null for none. */
  async nextDue(): Promise<number | null> {
    const r = await this.pool.query<{ ms: string | null }>(
      `SELECT (EXTRACT(EPOCH FROM min(next_at)) * 1000)::bigint AS ms FROM holt.message_replies
       WHERE status = 'pending'`,
    );
    return r.rows[0]?.ms ? Number(r.rows[0].ms) : null;
  }

  /** Checks a not-yet-final outcome again later (no attempt counted). */
  async later(id: string, ms: number): Promise<void> {
    await this.pool.query(
      `UPDATE holt.message_replies SET next_at = now() + $2 * interval '1 millisecond'
       WHERE id = $1 AND status = 'pending'`,
      [id, ms],
    );
  }

  /**
   * Takes a due reply for one attempt (one replica wins: the next attempt is pushed `leaseMs` away
   * first) with the outcome it sends: the one fixed by an earlier attempt, else `outcome`, fixed now.
   */
  async claim(id: string, outcome: unknown, leaseMs: number): Promise<Reply | undefined> {
    const r = await this.pool.query(
      `UPDATE holt.message_replies SET attempts = attempts + 1,
         next_at = now() + $3 * interval '1 millisecond', outcome = coalesce(outcome, $2::jsonb)
       WHERE id = $1 AND status = 'pending' AND next_at <= now() RETURNING ${COLS}`,
      [id, JSON.stringify(outcome), leaseMs],
    );
    return r.rows[0] ? ReplyRow.parse(r.rows[0]) : undefined;
  }

  /** The attempt's end: delivered, retried at `retryAt`, or failed for good. */
  async attempted(
    id: string,
    a:
      | { ok: true; status: number }
      | { ok: false; status: number | null; error: string; retryAtMs: number | null },
  ): Promise<void> {
    if (a.ok) {
      await this.pool.query(
        `UPDATE holt.message_replies SET status = 'delivered', delivered_at = now(), last_status = $2,
           last_error = NULL WHERE id = $1`,
        [id, a.status],
      );
      return;
    }
    await this.pool.query(
      `UPDATE holt.message_replies SET last_status = $2, last_error = $3,
         status = CASE WHEN $4::double precision IS NULL THEN 'failed' ELSE 'pending' END,
         next_at = CASE WHEN $4::double precision IS NULL THEN next_at ELSE to_timestamp($4 / 1000) END
       WHERE id = $1`,
      [id, a.status, a.error.slice(0, 500), a.retryAtMs],
    );
  }

  /** An agent's replies, the newest last (`holt life show`). */
  async list(instance: string, role: string, limit = 20): Promise<Reply[]> {
    const r = await this.pool.query(
      `SELECT * FROM (SELECT ${COLS} FROM holt.message_replies WHERE instance = $1 AND role = $2
         ORDER BY created_at DESC LIMIT $3) x ORDER BY created_ms`,
      [instance, role, limit],
    );
    return r.rows.map((x) => ReplyRow.parse(x));
  }
}
