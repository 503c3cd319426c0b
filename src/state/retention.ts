import type pg from 'pg';
import { ms, tx } from './sql.ts';

/** What one pass removed. */
export interface Pruned {
  turns: number;
  steps: number;
  rows: number;
  heads: number;
  usage: number;
  /** Planning agents' goal plans no turn has touched since the cut-off. */
  plans: number;
  /** Living agents' delivered messages, ended waits, old deliveries and audit rows (work items stay). */
  life: number;
  /** Long-term memories past their expiry and recalled fewer than MEMORY_KEEP_USES times. */
  memories: number;
}

/** A memory recalled this often outlives its expiry (it has proved useful): kept until forgotten. */
export const MEMORY_KEEP_USES = 10;

// Memories go by their own expiry, not the cut-off; the ones the agents keep recalling stay.
const PRUNE_MEMORIES = `DELETE FROM holt.agent_memories WHERE id IN (SELECT id FROM holt.agent_memories
  WHERE instance = $1 AND expires_at < now() AND uses < $2 LIMIT $3)`;

// Finished turns older than the cut-off, with what hangs off them: their steps, waits and inbox rows.
// A turn whose row is still live, or failed and not yet reported as a Failure, is kept.
const PRUNE_TURNS = `
WITH t AS (
  SELECT turn_id FROM holt.agent_turns a
  WHERE a.instance = $1 AND a.status IN ('done', 'failed') AND a.ended_at < now() - $2::interval
    AND NOT EXISTS (SELECT 1 FROM holt.agent_inbox i WHERE i.turn_id = a.turn_id
                    AND (i.status NOT IN ('done', 'failed') OR NOT i.failure_reported AND i.status = 'failed'))
  ORDER BY a.ended_at LIMIT $3 FOR UPDATE SKIP LOCKED
), w AS (DELETE FROM holt.turn_waiting_tools x USING t WHERE x.turn_id = t.turn_id RETURNING 1),
s AS (DELETE FROM holt.agent_steps x USING t WHERE x.turn_id = t.turn_id RETURNING 1),
i AS (DELETE FROM holt.agent_inbox x USING t WHERE x.turn_id = t.turn_id RETURNING 1),
d AS (DELETE FROM holt.agent_turns x USING t WHERE x.turn_id = t.turn_id RETURNING 1)
SELECT (SELECT count(*) FROM d)::int AS turns, (SELECT count(*) FROM s)::int AS steps,
       (SELECT count(*) FROM i)::int AS rows, (SELECT count(*) FROM w)::int AS waits`;

// Actors with nothing left: idle, no turn, untouched since the cut-off.
const PRUNE_HEADS = `
DELETE FROM holt.agent_state_head h
WHERE h.ctid IN (
  SELECT h2.ctid FROM holt.agent_state_head h2
  WHERE h2.instance = $1 AND h2.status = 'idle' AND h2.updated_at < now() - $2::interval
    AND NOT EXISTS (SELECT 1 FROM holt.agent_turns t WHERE t.instance = h2.instance AND t.actor_id = h2.actor_id)
  LIMIT $3)`;

// Ledger rows older than the cut-off; the all-time totals stay (holt.pruning leaves them alone).
const PRUNE_USAGE = `
DELETE FROM holt.llm_usage WHERE id IN (
  SELECT id FROM holt.llm_usage WHERE instance = $1 AND at < now() - $2::interval LIMIT $3)`;

const PRUNE_PLANS = `
DELETE FROM holt.llm_plans WHERE (instance, role, goal_id) IN (
  SELECT instance, role, goal_id FROM holt.llm_plans WHERE instance = $1 AND updated_at < now() - $2::interval LIMIT $3)`;

// Living agents (src/life): what was delivered or ended before the cut-off (a message whose outcome is
// still to be delivered, or whose A2A task is not final, stays), finished deliveries and A2A tasks, and the deliveries of pruned turns. Work items and their completion reports are kept: they are the agents' record.
const PRUNE_LIFE = [
  `DELETE FROM holt.agent_messages WHERE id IN (SELECT m.id FROM holt.agent_messages m WHERE m.instance = $1
     AND m.turn_id IS NOT NULL AND m.delivered_at < now() - $2::interval
     AND NOT EXISTS (SELECT 1 FROM holt.message_replies r WHERE r.message_id = m.id AND r.status = 'pending')
     AND NOT EXISTS (SELECT 1 FROM holt.a2a_tasks a WHERE a.message_id = m.id AND a.outcome IS NULL)
     LIMIT $3)`,
  `DELETE FROM holt.a2a_tasks WHERE id IN (SELECT id FROM holt.a2a_tasks WHERE instance = $1
     AND outcome IS NOT NULL AND updated_at < now() - $2::interval LIMIT $3)`,
  `DELETE FROM holt.message_replies WHERE id IN (SELECT id FROM holt.message_replies WHERE instance = $1
     AND status <> 'pending' AND created_at < now() - $2::interval LIMIT $3)`,
  `DELETE FROM holt.agent_waits WHERE id IN (SELECT id FROM holt.agent_waits WHERE instance = $1
     AND state <> 'waiting' AND ended_at < now() - $2::interval LIMIT $3)`,
  `DELETE FROM holt.life_turns WHERE turn_id IN (SELECT l.turn_id FROM holt.life_turns l WHERE l.instance = $1
     AND l.created_at < now() - $2::interval
     AND NOT EXISTS (SELECT 1 FROM holt.agent_turns t WHERE t.turn_id = l.turn_id) LIMIT $3)`,
  `DELETE FROM holt.life_audit WHERE id IN (SELECT id FROM holt.life_audit WHERE instance = $1
     AND at < now() - $2::interval LIMIT $3)`,
];

// The ingress's idempotency keys (hashes) outlive the messages they admitted: a replay stays a
// duplicate long after the message is gone. Counted with `life`.
const PRUNE_INGRESS_KEYS = `DELETE FROM holt.ingress_idempotency WHERE (instance, role, token_id, key_hash) IN (
  SELECT instance, role, token_id, key_hash FROM holt.ingress_idempotency WHERE instance = $1
    AND seen_at < now() - $2::interval LIMIT $3)`;

/** How long the ingress's idempotency keys are kept by default (HOLT_INGRESS_IDEMPOTENCY_DAYS). */
export const INGRESS_KEYS_KEPT_MS = 365 * 86_400_000;

/**
 * Removes an instance's finished work older than `olderThanMs` from Postgres, a batch per
 * transaction (short locks, nothing live touched). Budget windows must be shorter than the cut-off.
 * The ingress's idempotency keys go after `keysOlderThanMs`, never before the messages themselves.
 */
export async function pruneFinished(
  pool: pg.Pool,
  instance: string,
  olderThanMs: number,
  batch = 1000,
  keysOlderThanMs = INGRESS_KEYS_KEPT_MS,
): Promise<Pruned> {
  const cut = ms(olderThanMs);
  const out: Pruned = { turns: 0, steps: 0, rows: 0, heads: 0, usage: 0, plans: 0, life: 0, memories: 0 };
  for (;;) {
    const r = await pool.query<{ turns: number; steps: number; rows: number }>(PRUNE_TURNS, [
      instance,
      cut,
      batch,
    ]);
    const n = r.rows[0] ?? { turns: 0, steps: 0, rows: 0 };
    out.turns += n.turns;
    out.steps += n.steps;
    out.rows += n.rows;
    if (n.turns < batch) break;
  }
  for (;;) {
    const r = await pool.query(PRUNE_HEADS, [instance, cut, batch]);
    out.heads += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < batch) break;
  }
  for (;;) {
    const n = await tx<number>(pool, async (c) => {
      await c.query(`SET LOCAL holt.pruning = 'on'`);
      const r = await c.query(PRUNE_USAGE, [instance, cut, batch]);
      return { value: r.rowCount ?? 0 };
    });
    out.usage += n;
    if (n < batch) break;
  }
  for (;;) {
    const r = await pool.query(PRUNE_PLANS, [instance, cut, batch]);
    out.plans += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < batch) break;
  }
  const keysCut = ms(Math.max(olderThanMs, keysOlderThanMs));
  for (const [sql, before] of [
    ...PRUNE_LIFE.map((q) => [q, cut] as const),
    [PRUNE_INGRESS_KEYS, keysCut] as const,
  ])
    for (;;) {
      const r = await pool.query(sql, [instance, before, batch]);
      out.life += r.rowCount ?? 0;
      if ((r.rowCount ?? 0) < batch) break;
    }
  for (;;) {
    const r = await pool.query(PRUNE_MEMORIES, [instance, MEMORY_KEEP_USES, batch]);
    out.memories += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < batch) break;
  }
  return out;
}
