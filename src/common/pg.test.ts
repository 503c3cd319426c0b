import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { ConfigError } from './config.ts';
import { createPool, pgTimeouts } from './pg.ts';

// Every Postgres wait is bounded: a held lock, a long statement, a server that never answers.
let pgs: PostgresServer;
let silent: Server;
let silentPort = 0;
beforeAll(async () => {
  pgs = await startPostgres();
  // Accepts connections and never says a word (a partitioned or frozen server).
  silent = createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as { port: number }).port;
});
afterAll(async () => {
  silent?.close();
  await pgs?.stop();
});

describe('Postgres timeouts', () => {
  it('defaults, variables, and a clear error for a bad value', () => {
    expect(pgTimeouts({})).toMatchObject({
      connectionTimeoutMillis: 10_000,
      statement_timeout: 30_000,
      lock_timeout: 10_000,
      query_timeout: 35_000,
      keepAlive: true,
    });
    expect(pgTimeouts({ HOLT_PG_LOCK_TIMEOUT_MS: '250', HOLT_PG_STATEMENT_TIMEOUT_MS: '' })).toMatchObject({
      lock_timeout: 250,
      statement_timeout: 30_000,
    });
    expect(() => pgTimeouts({ HOLT_PG_CONNECT_TIMEOUT_MS: 'soon' })).toThrow(ConfigError);
    expect(() => pgTimeouts({ HOLT_PG_CONNECT_TIMEOUT_MS: 'soon' })).toThrow(/HOLT_PG_CONNECT_TIMEOUT_MS/);
  });

  it('a lock held elsewhere fails the waiting statement instead of hanging it', async () => {
    const holder = createPool(pgs.url);
    const waiter = createPool(pgs.url, { lock_timeout: 200 });
    try {
      await holder.query('CREATE TABLE IF NOT EXISTS locked (id int PRIMARY KEY)');
      await holder.query('INSERT INTO locked VALUES (1) ON CONFLICT DO NOTHING');
      const c = await holder.connect();
      await c.query('BEGIN');
      await c.query('SELECT * FROM locked WHERE id = 1 FOR UPDATE');
      await expect(waiter.query('UPDATE locked SET id = 1 WHERE id = 1')).rejects.toThrow(/lock timeout/);
      await c.query('ROLLBACK');
      c.release();
      // The pool is fine afterwards.
      expect((await waiter.query('SELECT 1 AS one')).rows[0].one).toBe(1);
    } finally {
      await Promise.all([holder.end(), waiter.end()]);
    }
  });

  it('a statement over its time is cancelled by the server', async () => {
    const pool = createPool(pgs.url, { statement_timeout: 200 });
    try {
      await expect(pool.query('SELECT pg_sleep(30)')).rejects.toThrow(/statement timeout/);
    } finally {
      await pool.end();
    }
  });

  it('a server that accepts and never answers fails the connect', async () => {
    const pool = createPool(`postgres://holt@127.0.0.1:${silentPort}/holt`, { connectionTimeoutMillis: 300 });
    try {
      await expect(pool.query('SELECT 1')).rejects.toThrow(/timeout/i);
    } finally {
      await pool.end();
    }
  });

  it('a query the server never answers fails on the client', async () => {
    // The statement timeout is off, as on a server that froze mid-query: the client's own bound holds.
    const pool = createPool(pgs.url, { statement_timeout: false, query_timeout: 300 });
    try {
      await expect(pool.query('SELECT pg_sleep(30)')).rejects.toThrow(/timeout/i);
    } finally {
      await pool.end();
    }
  });
});
