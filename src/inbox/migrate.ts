import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type MigrationBuilder, type RunnerOption, runner } from 'node-pg-migrate';
import { z } from 'zod';
import type { Logger } from '../common/logger.ts';

const DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');

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
    ignorePattern: '(\\..*|.*\\.test\\.ts)',
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
  return names;
}
