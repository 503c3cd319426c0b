import pg from 'pg';
import type { Logger } from './logger.ts';

/**
 * A pg pool that survives its server going away: an idle client's connection error is logged (it is
 * dropped from the pool and replaced on next use) instead of becoming an unhandled 'error' event.
 */
export function createPool(connectionString: string, opts: pg.PoolConfig = {}, log?: Logger): pg.Pool {
  const pool = new pg.Pool({ connectionString, ...opts });
  pool.on('error', (e) => log?.warn({ event_type: 'postgres_idle_client_error', error: e.message }));
  // A checked-out client's connection dying (server restart, admin shutdown) fails its query; not the process.
  pool.on('connect', (c) => c.on('error', () => undefined));
  return pool;
}

/** One client for one short job (set-up, a check): connected, given to `fn`, always ended. */
export async function withClient<T>(connectionString: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}
