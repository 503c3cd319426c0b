import { execFile } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';

const HOLT = join(import.meta.dirname, '../../bin/holt');

/** Runs `bin/holt migrate` as the migration Job does: configuration from the environment only. */
function holtMigrate(env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const { DATABASE_URL: _drop, ...base } = process.env;
  return new Promise((resolve) => {
    execFile(HOLT, ['migrate'], { env: { ...base, ...env } }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

let pgs: PostgresServer;
beforeAll(async () => {
  pgs = await startPostgres();
});
afterAll(async () => {
  await pgs?.stop();
});

describe('holt migrate', () => {
  it('applies the inbox schema to DATABASE_URL, and a second run is a no-op', async () => {
    const first = await holtMigrate({ DATABASE_URL: pgs.url });
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const db = new pg.Client({ connectionString: pgs.url });
    await db.connect();
    const t = await db.query(`SELECT to_regclass('holt.agent_inbox') IS NOT NULL AS t`);
    await db.end();
    expect(t.rows[0]).toEqual({ t: true });
    const second = await holtMigrate({ DATABASE_URL: pgs.url });
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('0 migration(s) applied');
  });

  it('without DATABASE_URL: exit 1 and one clear line', async () => {
    const r = await holtMigrate({});
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^holt migrate: DATABASE_URL: DATABASE_URL is required/);
  });

  it('an unreachable database fails after the wait, without printing the password', async () => {
    const r = await holtMigrate({
      DATABASE_URL: 'postgres://holt:s3cret@127.0.0.1:1/holt',
      HOLT_MIGRATE_WAIT_SECONDS: '0',
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^holt migrate: /);
    expect(r.stdout + r.stderr).not.toContain('s3cret');
  });
});
