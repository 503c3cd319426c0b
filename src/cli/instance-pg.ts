import type pg from 'pg';
import { errorMessage, isUnreachable } from '../common/errors.ts';
import { createPool } from '../common/pg.ts';
import { CliError, EXIT } from './output.ts';
import { resolveInstance } from './resolve.ts';
import { type PostgresTarget, remotePostgres } from './target.ts';

/**
 * Runs `fn` with a one-connection pool on the Postgres of the Holt given by --kube, else of a running
 * local instance; an instance without one is "not found", with `without` saying what it therefore lacks.
 */
export async function withInstancePostgres<T>(
  name: string | undefined,
  without: string,
  fn: (pool: pg.Pool, instance: string) => Promise<T>,
): Promise<T> {
  const at = remotePostgres() ?? localPostgres(name, without);
  const pool = createPool(at.url, { max: 1, ...(at.ssl ? { ssl: at.ssl } : {}) });
  try {
    return await fn(pool, at.name);
  } catch (e) {
    if (!(e instanceof CliError) && isUnreachable(e))
      throw new CliError(
        `the Postgres of '${at.name}' does not answer (${errorMessage(e)}): is it running? see \`holt status\``,
        EXIT.error,
      );
    throw e;
  } finally {
    await pool.end();
  }
}

function localPostgres(name: string | undefined, without: string): PostgresTarget {
  const s = resolveInstance(name);
  if (!s.postgresUrl)
    throw new CliError(`instance '${s.name}' has no Postgres, so ${without}`, EXIT.notFound);
  return { name: s.name, url: s.postgresUrl };
}
