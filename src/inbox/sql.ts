import type pg from 'pg';

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
