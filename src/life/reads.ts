import type pg from 'pg';
import { z } from 'zod';
import { lifeActorOf } from '../state/ids.ts';
import { Labels as LabelsSchema } from './labels.ts';

const num = z.coerce.number();
export const MessageRow = z.object({
  id: z.coerce.string(),
  kind: z.enum(['message', 'wake']),
  body: z.string().nullable(),
  labels: LabelsSchema,
  at_ms: num,
});
export type LifeMessage = z.infer<typeof MessageRow>;

export const WaitRow = z.object({
  id: z.uuid(),
  kind: z.enum(['timer', 'message', 'operator']),
  item_id: z.uuid().nullable(),
  on_what: z.string(),
  deadline_ms: num.nullable(),
  state: z.enum(['waiting', 'resolved', 'timed_out', 'cancelled']),
  /** Who cancelled it (life/tasks.ts), while it still waits for the scheduler to end it. */
  cancelled_by: z.string().nullable().default(null),
  created_ms: num,
});
export type LifeWait = z.infer<typeof WaitRow>;

export const WAIT_COLS = `id, kind, item_id, on_what, state, cancelled_by,
  (EXTRACT(EPOCH FROM deadline) * 1000)::bigint AS deadline_ms,
  (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS created_ms`;
export const MSG_COLS = `id, kind, body, labels, (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS at_ms`;

/** What people and the loop read of a living agent (`holt life`, `holt work`, a turn's opening). */
export class LifeReads {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  async messages(ids: string[]): Promise<LifeMessage[]> {
    if (!ids.length) return [];
    const r = await this.pool.query(
      `SELECT ${MSG_COLS} FROM holt.agent_messages WHERE id = ANY($1::bigint[]) ORDER BY id`,
      [ids],
    );
    return r.rows.map((x) => MessageRow.parse(x));
  }

  async waits(ids: string[]): Promise<LifeWait[]> {
    if (!ids.length) return [];
    const r = await this.pool.query(`SELECT ${WAIT_COLS} FROM holt.agent_waits WHERE id = ANY($1::uuid[])`, [
      ids,
    ]);
    return r.rows.map((x) => WaitRow.parse(x));
  }

  /** The agent's life row: running or stopped, and when its last message came in (ms, 0 for none). */
  async lifeRow(
    instance: string,
    role: string,
  ): Promise<{ state: 'running' | 'stopped'; lastMessageMs: number }> {
    const r = await this.pool.query<{ state: 'running' | 'stopped'; last_ms: string | null }>(
      `SELECT state, (EXTRACT(EPOCH FROM last_message_at) * 1000)::bigint AS last_ms FROM holt.agent_life
       WHERE instance = $1 AND role = $2`,
      [instance, role],
    );
    const row = r.rows[0];
    return { state: row?.state ?? 'running', lastMessageMs: row?.last_ms ? Number(row.last_ms) : 0 };
  }

  /** The agent's life turn that has not ended, if any. */
  async activeTurn(instance: string, role: string): Promise<string | undefined> {
    const r = await this.pool.query<{ active_turn_id: string | null }>(
      'SELECT active_turn_id FROM holt.agent_state_head WHERE instance = $1 AND actor_id = $2',
      [instance, lifeActorOf(instance, role)],
    );
    return r.rows[0]?.active_turn_id ?? undefined;
  }

  /** The scheduler's audit trail of a role, newest last. */
  async audit(
    instance: string,
    role: string,
    limit = 50,
  ): Promise<{ decision: string; detail: unknown; atMs: number }[]> {
    const r = await this.pool.query<{ decision: string; detail: unknown; at_ms: string }>(
      `SELECT decision, detail, (EXTRACT(EPOCH FROM at) * 1000)::bigint AS at_ms FROM (
         SELECT * FROM holt.life_audit WHERE instance = $1 AND role = $2 ORDER BY id DESC LIMIT $3) a ORDER BY id`,
      [instance, role, limit],
    );
    return r.rows.map((x) => ({ decision: x.decision, detail: x.detail, atMs: Number(x.at_ms) }));
  }

  /** The roles that ever got a message or lived. */
  async roles(instance: string): Promise<string[]> {
    const r = await this.pool.query<{ role: string }>(
      'SELECT role FROM holt.agent_life WHERE instance = $1 ORDER BY role',
      [instance],
    );
    return r.rows.map((x) => x.role);
  }

  /** Messages of a role, newest last (`holt work show`, `holt hoard --messages`). */
  async recentMessages(
    instance: string,
    role: string,
    limit = 20,
  ): Promise<(LifeMessage & { role: string; turnId: string | null })[]> {
    const r = await this.pool.query(
      `SELECT ${MSG_COLS}, turn_id FROM (SELECT * FROM holt.agent_messages WHERE instance = $1 AND role = $2
         ORDER BY id DESC LIMIT $3) m ORDER BY id`,
      [instance, role, limit],
    );
    return r.rows.map((x) => ({
      ...MessageRow.parse(x),
      role,
      turnId: (x as { turn_id: string | null }).turn_id,
    }));
  }
}
