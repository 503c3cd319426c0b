import pg from 'pg';
import { z } from 'zod';
import { ConfigError, formatIssues } from './config.ts';
import type { Logger } from './logger.ts';

const ms = z.coerce.number().int().positive();

/**
 * Bounds on every Postgres wait, so a lock wait or a partition fails a step (which is retried)
 * instead of hanging it: connect, statement and lock on the server, the whole query on the client
 * (a little longer than the statement, so the server's clearer error wins), and TCP keepalive to
 * notice a peer that vanished. Each is a variable of every program.
 */
const TimeoutEnv = z.object({
  HOLT_PG_CONNECT_TIMEOUT_MS: ms.default(10_000),
  HOLT_PG_STATEMENT_TIMEOUT_MS: ms.default(30_000),
  HOLT_PG_LOCK_TIMEOUT_MS: ms.default(10_000),
  HOLT_PG_QUERY_TIMEOUT_MS: ms.optional(),
  HOLT_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: ms.default(60_000),
  HOLT_PG_KEEPALIVE_DELAY_MS: ms.default(10_000),
});

/** The timeouts for pg from the environment (empty variables are unset); a bad value is a ConfigError. */
export function pgTimeouts(env: NodeJS.ProcessEnv = process.env): pg.ClientConfig {
  const r = TimeoutEnv.safeParse(
    Object.fromEntries(Object.entries(env).filter(([k, v]) => k.startsWith('HOLT_PG_') && v !== '')),
  );
  if (!r.success) throw new ConfigError(`invalid Postgres timeouts: ${formatIssues(r.error)}`);
  const e = r.data;
  return {
    connectionTimeoutMillis: e.HOLT_PG_CONNECT_TIMEOUT_MS,
    statement_timeout: e.HOLT_PG_STATEMENT_TIMEOUT_MS,
    lock_timeout: e.HOLT_PG_LOCK_TIMEOUT_MS,
    query_timeout: e.HOLT_PG_QUERY_TIMEOUT_MS ?? e.HOLT_PG_STATEMENT_TIMEOUT_MS + 5_000,
    idle_in_transaction_session_timeout: e.HOLT_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: e.HOLT_PG_KEEPALIVE_DELAY_MS,
  };
}

/**
 * A pg pool that survives its server going away: an idle client's connection error is logged (it is
 * dropped from the pool and replaced on next use) instead of becoming an unhandled 'error' event.
 * Every wait is bounded (`pgTimeouts`); `opts` wins over the environment.
 */
export function createPool(connectionString: string, opts: pg.PoolConfig = {}, log?: Logger): pg.Pool {
  const pool = new pg.Pool({ connectionString, ...pgTimeouts(), ...opts, Client: QuietClient });
  pool.on('error', (e) => log?.warn({ event_type: 'postgres_idle_client_error', error: e.message }));
  return pool;
}

/**
 * A client whose connection dying (server restart, admin shutdown) fails the query on it, never the
 * process: listened to from birth, so also a client the pool was still connecting when it was ended
 * (never handed out, so never given a listener by a 'connect' hook; one CI run crashed on such a one).
 */
class QuietClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    this.on('error', () => undefined);
  }
}

/** One client for one short job (set-up, a check): connected, given to `fn`, always ended. */
export async function withClient<T>(connectionString: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const { connectionTimeoutMillis, keepAlive, keepAliveInitialDelayMillis } = pgTimeouts();
  // No statement timeout: migrations may legitimately run long.
  const c = new QuietClient({
    connectionString,
    connectionTimeoutMillis,
    keepAlive,
    keepAliveInitialDelayMillis,
  });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}
