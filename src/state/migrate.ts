import { readdirSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type MigrationBuilder, type RunnerOption, runner } from 'node-pg-migrate';
import { z } from 'zod';
import { applyGrants } from '../access/postgres.ts';
import type { Logger } from '../common/logger.ts';
import { withClient } from '../common/pg.ts';

const DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');

// Files in migrations/ that are not migrations: dotfiles, tests, the README.
const IGNORE = /^(\..*|.*\.test\.ts|.*\.md)$/;

/** The migrations this build knows, by name (file name without extension), in order. */
export function knownMigrations(): string[] {
  return readdirSync(DIR)
    .filter((f) => !IGNORE.test(f) && ['.ts', '.js'].includes(extname(f)))
    .map((f) => basename(f, extname(f)))
    .sort();
}

const MigrationModule = z.object({
  up: z.custom<(pgm: MigrationBuilder) => Promise<void>>((v) => typeof v === 'function'),
  down: z.custom<(pgm: MigrationBuilder) => Promise<void>>((v) => typeof v === 'function').optional(),
});

// Node runs the .ts migrations natively; node-pg-migrate's default loader would pull in jiti instead.
const nativeLoader = async (filePaths: string[]) =>
  Promise.all(
    filePaths.map(async (p) => ({
      id: p,
      filePaths: [p],
      actions: MigrationModule.parse(await import(pathToFileURL(p).href)),
    })),
  );

/**
 * Applies every pending migration of the inbox schema (used by `holt up`, the operator's migration
 * Job and the tests). Concurrent callers wait on node-pg-migrate's advisory lock, so it is safe to race.
 */
export async function migrate(databaseUrl: string, log?: Logger): Promise<string[]> {
  const opts: RunnerOption = {
    databaseUrl,
    dir: DIR,
    ignorePattern: IGNORE.source.slice(1, -1),
    migrationsTable: 'pgmigrations',
    migrationsSchema: 'holt',
    createMigrationsSchema: true,
    direction: 'up',
    singleTransaction: true,
    advisoryLockMode: 'wait',
    migrationLoaderStrategies: [{ extensions: ['.ts', '.js'], loader: nativeLoader }],
    log: () => undefined,
  };
  const ran = await runner(opts);
  const names = ran.map((m) => m.name);
  if (names.length) log?.info({ event_type: 'migrated', migrations: names }, 'inbox schema migrated');
  // Each component's role its own tables and columns, where those roles exist (bundled stores).
  await withClient(databaseUrl, applyGrants);
  return names;
}

/** Whether every migration of this build is applied (readable by every component's role). */
export function schemaCurrent(databaseUrl: string): Promise<boolean> {
  return withClient(databaseUrl, async (c) => {
    const r = await c
      .query<{ name: string }>('SELECT name FROM holt.pgmigrations')
      .catch(() => ({ rows: [] }));
    const have = new Set(r.rows.map((x) => x.name));
    return knownMigrations().every((m) => have.has(m));
  });
}

/**
 * For the runtime (orchestrator, LLM pups): a current schema is left alone, so a component's role
 * never tries DDL; otherwise migrate (tests and single-role databases), failing with what to do.
 */
export async function ensureSchema(databaseUrl: string, log?: Logger): Promise<void> {
  if (await schemaCurrent(databaseUrl)) return;
  try {
    await migrate(databaseUrl, log);
  } catch (e) {
    if ((e as { code?: string }).code === '42501')
      throw new Error(
        'the database schema is not migrated and this role may not migrate it: run `holt migrate` as the schema owner first',
      );
    throw e;
  }
}
