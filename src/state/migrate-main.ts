import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { ensureRoles } from '../access/postgres.ts';
import { formatIssues } from '../common/config.ts';
import { errorMessage, isUnreachable } from '../common/errors.ts';
import { createLogger, redactUrl } from '../common/logger.ts';
import { withClient } from '../common/pg.ts';
import { parseProgram } from '../common/program.ts';
import { migrate } from './migrate.ts';
import { MIGRATE_PROGRAM } from './migrate-program.ts';

const PROGRAM = 'holt migrate';

const Env = z.object({
  DATABASE_URL: z
    .string({ error: 'DATABASE_URL is required (postgres://user:password@host:port/db)' })
    .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must be a postgres:// or postgresql:// URL'),
  HOLT_MIGRATE_WAIT_SECONDS: z.coerce.number().int().min(0).max(3600).default(60),
  /** An external database's component roles (made by its owner's platform): each must exist. */
  HOLT_DATABASE_ROLES: z
    .string()
    .regex(/^[a-z_][a-z0-9_]*(,[a-z_][a-z0-9_]*)*$/, 'must be role names separated by commas')
    .optional(),
  /** Bundled Postgres: a superuser's URL and the roles' passwords; the roles are made first. */
  HOLT_DATABASE_ADMIN_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  HOLT_DATABASE_OWNER_PASSWORD: z.string().min(16).optional(),
  HOLT_DATABASE_ORCHESTRATOR_PASSWORD: z.string().min(16).optional(),
  HOLT_DATABASE_PUP_PASSWORD: z.string().min(16).optional(),
  HOLT_DATABASE_OPERATOR_PASSWORD: z.string().min(16).optional(),
});

/**
 * The component roles the Holt's pods log in as must exist before the migration grants them their
 * tables (applyGrants skips a role it does not find, and the pods would then be refused everything).
 */
async function expectRoles(url: string, names: string[]): Promise<void> {
  const found = await withClient(url, (c) =>
    c.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY($1)', [names]),
  );
  const have = new Set(found.rows.map((r) => r.rolname));
  const missing = names.filter((n) => !have.has(n));
  if (missing.length)
    throw new Error(
      `role(s) ${missing.join(', ')} do not exist: create them with LOGIN and the password of their Secret (CloudNativePG: spec.managed.roles), then this Job's retry grants them their tables`,
    );
}

/**
 * `holt migrate`: applies the inbox schema's pending migrations to DATABASE_URL and exits (the
 * operator's migration Job runs it before the orchestrator starts). While Postgres is unreachable
 * it retries for HOLT_MIGRATE_WAIT_SECONDS (default 60) before failing, so a Job racing its
 * bundled store does not burn through its backoff. Exit 0 done, 1 failed or bad configuration.
 */
export async function main(argv: string[], processEnv: NodeJS.ProcessEnv): Promise<number> {
  const cli = parseProgram(MIGRATE_PROGRAM, argv, processEnv);
  if (!cli.run) return cli.exitCode;
  const env = cli.env;
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    process.stderr.write(`${PROGRAM}: ${formatIssues(parsed.error)}\n`);
    return 1;
  }
  const { DATABASE_URL: url, HOLT_MIGRATE_WAIT_SECONDS: waitS } = parsed.data;
  const e = parsed.data;
  const roles =
    e.HOLT_DATABASE_ADMIN_URL &&
    e.HOLT_DATABASE_OWNER_PASSWORD &&
    e.HOLT_DATABASE_ORCHESTRATOR_PASSWORD &&
    e.HOLT_DATABASE_PUP_PASSWORD &&
    e.HOLT_DATABASE_OPERATOR_PASSWORD
      ? {
          admin: e.HOLT_DATABASE_ADMIN_URL,
          owner: e.HOLT_DATABASE_OWNER_PASSWORD,
          orchestrator: e.HOLT_DATABASE_ORCHESTRATOR_PASSWORD,
          pup: e.HOLT_DATABASE_PUP_PASSWORD,
          operator: e.HOLT_DATABASE_OPERATOR_PASSWORD,
        }
      : undefined;
  const log = createLogger('migrate');
  const deadline = Date.now() + waitS * 1000;
  for (let attempt = 1; ; attempt++) {
    try {
      if (roles) await ensureRoles(roles.admin, new URL(url).pathname.slice(1), roles);
      if (e.HOLT_DATABASE_ROLES) await expectRoles(url, e.HOLT_DATABASE_ROLES.split(','));
      const ran = await migrate(url, log);
      log.info({ event_type: 'migrate_done', applied: ran.length }, `${ran.length} migration(s) applied`);
      return 0;
    } catch (e) {
      const message = redactUrl(errorMessage(e));
      if (isUnreachable(e) && Date.now() < deadline) {
        log.warn({ event_type: 'migrate_waiting', attempt, error: message }, 'postgres not reachable yet');
        await sleep(2_000);
        continue;
      }
      log.error(
        { event_type: 'migrate_failed', database: redactUrl(url), error: message },
        'migration failed',
      );
      process.stderr.write(`${PROGRAM}: ${message}\n`);
      return 1;
    }
  }
}
