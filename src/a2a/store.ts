import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { isFinal, OUTCOME_STATES, type Outcome } from '../life/outcome.ts';
import type { ReplyStore } from '../life/replies.ts';

/**
 * The A2A tasks of living agents (`holt.a2a_tasks`, migration a2a_tasks): one row per task, its
 * caller's token its owner. Its state is followed from the message it queued (life/outcome.ts, as a
 * delivery's is) at each read, on any replica, and kept in the row once final, so it outlives the
 * message and never changes after.
 */

const num = z.coerce.number();
const OutcomeSchema = z.object({
  state: z.enum(OUTCOME_STATES),
  text: z.string().optional(),
  itemId: z.string().optional(),
  turnId: z.string().optional(),
});

export const A2ATaskRow = z.object({
  id: z.uuid(),
  instance: z.string(),
  role: z.string(),
  token_name: z.string(),
  context_id: z.string(),
  message_id: z.coerce.string(),
  /** The caller's messages, as A2A JSON (v1.0), the first first. */
  history: z.array(z.record(z.string(), z.unknown())),
  outcome: OutcomeSchema.nullable(),
  cancelled_by: z.string().nullable(),
  created_ms: num,
  updated_ms: num,
});
export type A2ATaskRow = z.infer<typeof A2ATaskRow>;

/** Who a task belongs to: an agent of an instance, and the token that made it. */
export interface Owner {
  instance: string;
  role: string;
  tokenName: string;
}

const COLS = `id, instance, role, token_name, context_id, message_id, history, outcome, cancelled_by,
  (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS created_ms,
  (EXTRACT(EPOCH FROM updated_at) * 1000)::bigint AS updated_ms`;
const OWNED = 'instance = $1 AND role = $2 AND token_name = $3';
const parse = (r: unknown) => A2ATaskRow.parse(r);

export class A2ATasks {
  readonly #pool: pg.Pool;
  readonly #replies: Pick<ReplyStore, 'outcome'>;
  constructor(pool: pg.Pool, replies: Pick<ReplyStore, 'outcome'>) {
    this.#pool = pool;
    this.#replies = replies;
  }

  /** The task of a queued message: made now, or the one a resent message made first. */
  async open(o: Owner, messageId: string, contextId: string, message: object): Promise<A2ATaskRow> {
    const r = await this.#pool.query(
      `INSERT INTO holt.a2a_tasks (id, instance, role, token_name, context_id, message_id, history)
       VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) ON CONFLICT (message_id) DO NOTHING RETURNING ${COLS}`,
      [randomUUID(), o.instance, o.role, o.tokenName, contextId, messageId, JSON.stringify([message])],
    );
    if (r.rows[0]) return parse(r.rows[0]);
    const old = await this.#pool.query(`SELECT ${COLS} FROM holt.a2a_tasks WHERE message_id = $1`, [
      messageId,
    ]);
    return parse(old.rows[0]);
  }

  async get(o: Owner, id: string): Promise<A2ATaskRow | undefined> {
    if (!z.uuid().safeParse(id).success) return undefined;
    const r = await this.#pool.query(`SELECT ${COLS} FROM holt.a2a_tasks WHERE ${OWNED} AND id = $4`, [
      o.instance,
      o.role,
      o.tokenName,
      id,
    ]);
    return r.rows[0] ? parse(r.rows[0]) : undefined;
  }

  /** The owner's tasks, the last updated first, optionally of one context. */
  async list(o: Owner, q: { contextId?: string; limit: number; offset: number }): Promise<A2ATaskRow[]> {
    const r = await this.#pool.query(
      `SELECT ${COLS} FROM holt.a2a_tasks WHERE ${OWNED} AND ($4::text IS NULL OR context_id = $4)
       ORDER BY updated_at DESC, id DESC LIMIT $5 OFFSET $6`,
      [o.instance, o.role, o.tokenName, q.contextId ?? null, q.limit, q.offset],
    );
    return r.rows.map(parse);
  }

  /** A caller's next message in the task (an answer to input-required), appended to its history. */
  async append(id: string, message: object): Promise<void> {
    await this.#pool.query(
      `UPDATE holt.a2a_tasks SET history = history || $2::jsonb, updated_at = now() WHERE id = $1`,
      [id, JSON.stringify([message])],
    );
  }

  /** Marks a task cancelled unless it is final already; the row as it is after. */
  async cancel(t: A2ATaskRow, by: string): Promise<A2ATaskRow> {
    const r = await this.#pool.query(
      `UPDATE holt.a2a_tasks SET cancelled_by = $2, outcome = $3::jsonb, updated_at = now()
       WHERE id = $1 AND outcome IS NULL RETURNING ${COLS}`,
      [t.id, by, JSON.stringify({ state: 'canceled', text: `cancelled by ${by}` })],
    );
    return r.rows[0] ? parse(r.rows[0]) : ((await this.byId(t.id)) ?? t);
  }

  /**
   * What became of the task: its kept outcome once final, else followed from its message now (and
   * kept if that is final).
   */
  async outcome(t: A2ATaskRow): Promise<Outcome> {
    if (t.outcome) return t.outcome;
    const o = await this.#replies.outcome(t.message_id);
    if (isFinal(o)) {
      const r = await this.#pool.query(
        `UPDATE holt.a2a_tasks SET outcome = $2::jsonb, updated_at = now() WHERE id = $1 AND outcome IS NULL
         RETURNING outcome`,
        [t.id, JSON.stringify(o)],
      );
      // A cancel between the read and this write wins: read the row's.
      if (!r.rows[0]) return (await this.byId(t.id))?.outcome ?? o;
    }
    return o;
  }

  /** Withdraws a message no turn has taken yet; false once one has. */
  async withdraw(messageId: string): Promise<boolean> {
    const r = await this.#pool.query('DELETE FROM holt.agent_messages WHERE id = $1 AND turn_id IS NULL', [
      messageId,
    ]);
    return (r.rowCount ?? 0) > 0;
  }

  private async byId(id: string): Promise<A2ATaskRow | undefined> {
    const r = await this.#pool.query(`SELECT ${COLS} FROM holt.a2a_tasks WHERE id = $1`, [id]);
    return r.rows[0] ? parse(r.rows[0]) : undefined;
  }
}
