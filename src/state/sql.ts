import type pg from 'pg';
import type { Fence } from './schema.ts';

/** Runs `fn` in one transaction on one pooled connection; rolls back on a throw or when it returns `rollback`. */
export async function tx<T>(
  pool: pg.Pool,
  fn: (c: pg.PoolClient) => Promise<{ value: T; rollback?: boolean }>,
): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const r = await fn(c);
    await c.query(r.rollback ? 'ROLLBACK' : 'COMMIT');
    return r.value;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw e;
  } finally {
    c.release();
  }
}

export const ms = (n: number) => `${Math.max(0, Math.round(n))} milliseconds`;

/**
 * Whether the actor's head still names this turn at this epoch: the first statement of a turn's write
 * transaction (FOR SHARE, so the head cannot move on before the write commits). A stale process learns
 * it from a false and writes nothing.
 */
export async function holdsFence(c: pg.PoolClient, f: Fence): Promise<boolean> {
  const r = await c.query(
    `SELECT 1 FROM holt.agent_state_head h
     WHERE h.instance = $1 AND h.actor_id = $2 AND h.turn_epoch = $3 AND h.active_turn_id = $4
       AND h.status IN ('dispatched', 'running', 'suspended')
     FOR SHARE OF h`,
    [f.instance, f.actorId, f.epoch, f.turnId],
  );
  return r.rowCount === 1;
}
