import pg from 'pg';
import { withClient } from '../common/pg.ts';

/** The two roles of Holt's database: the schema's owner (migrations) and the runtime's (DML only). */
export const PG_OWNER = 'holt_owner';
export const PG_APP = 'holt_app';

/**
 * Run as a superuser once the database exists: both roles, not superusers, with `owner` owning the
 * database and its public schema, and `app` given DML on whatever `owner` creates from now on.
 * Idempotent (passwords are reset to the ones given). Never `COPY ... PROGRAM` for either role.
 */
export function roleStatements(database: string, ownerPassword: string, appPassword: string): string[] {
  const id = pg.escapeIdentifier;
  const lit = pg.escapeLiteral;
  const role = (name: string) =>
    `DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = ${lit(name)}) THEN CREATE ROLE ${id(name)} LOGIN; END IF; END $$`;
  const owner = id(PG_OWNER);
  const app = id(PG_APP);
  return [
    role(PG_OWNER),
    role(PG_APP),
    `ALTER ROLE ${owner} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD ${lit(ownerPassword)}`,
    `ALTER ROLE ${app} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD ${lit(appPassword)}`,
    `ALTER DATABASE ${id(database)} OWNER TO ${owner}`,
    `REVOKE ALL ON DATABASE ${id(database)} FROM PUBLIC`,
    `GRANT CONNECT ON DATABASE ${id(database)} TO ${app}`,
  ];
}

/** Run in the database itself (as a superuser): nobody but the owner creates anything in public. */
export function schemaStatements(): string[] {
  const owner = pg.escapeIdentifier(PG_OWNER);
  const app = pg.escapeIdentifier(PG_APP);
  return [
    `ALTER SCHEMA public OWNER TO ${owner}`,
    'REVOKE CREATE ON SCHEMA public FROM PUBLIC',
    `GRANT USAGE ON SCHEMA public TO ${app}`,
  ];
}

/**
 * Run by the owner after migrating: DML on every table and sequence of schema holt, now and later
 * (pgmigrations included: the runtime reads it).
 * Safe to repeat; a no-op for a database where the app role does not exist (external: one role).
 */
export function grantStatements(app = PG_APP): string[] {
  const a = pg.escapeIdentifier(app);
  return [
    // Every table is in schema holt, the migrations' own too (the runtime reads it: is the schema current?).
    `GRANT USAGE ON SCHEMA holt TO ${a}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA holt TO ${a}`,
    `GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA holt TO ${a}`,
    `ALTER DEFAULT PRIVILEGES IN SCHEMA holt GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${a}`,
    `ALTER DEFAULT PRIVILEGES IN SCHEMA holt GRANT USAGE, SELECT ON SEQUENCES TO ${a}`,
    // The migration history is the owner's to write.
    `REVOKE INSERT, UPDATE, DELETE ON holt.pgmigrations FROM ${a}`,
  ];
}

/** Applies the roles and schema grants with a superuser's URL (the bundled stores' set-up). */
export async function ensureRoles(
  superUrl: string,
  database: string,
  passwords: { owner: string; app: string },
): Promise<void> {
  const run = (url: string, statements: string[]) =>
    withClient(url, async (c) => {
      for (const sql of statements) await c.query(sql);
    });
  await run(superUrl, roleStatements(database, passwords.owner, passwords.app));
  const inDb = new URL(superUrl);
  inDb.pathname = `/${database}`;
  await run(inDb.toString(), schemaStatements());
}

/** A role's URL on the same server and database as `url`. */
export function pgUrlAs(url: string, role: string, password: string): string {
  const u = new URL(url);
  u.username = role;
  u.password = password;
  return u.toString();
}
