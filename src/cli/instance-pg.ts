import type pg from 'pg';
import { createPool } from '../common/pg.ts';
import { CliError, EXIT } from './output.ts';
import { resolveInstance } from './resolve.ts';

/**
 * Runs `fn` with a one-connection pool on a running local instance's Postgres; an instance without one
 * is "not found", with `without` saying what it therefore lacks.
 */
export async function withInstancePostgres<T>(
  name: string | undefined,
  without: string,
  fn: (pool: pg.Pool, instance: string) => Promise<T>,
): Promise<T> {
  const s = resolveInstance(name);
  if (!s.postgresUrl)
    throw new CliError(`instance '${s.name}' has no Postgres, so ${without}`, EXIT.notFound);
  const pool = createPool(s.postgresUrl, { max: 1 });
  try {
    return await fn(pool, s.name);
  } finally {
    await pool.end();
  }
}
