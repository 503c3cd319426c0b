import type { MigrationBuilder } from 'node-pg-migrate';

// A worker that died with the row in hand, as its launcher reported it (exit code or signal, last log
// lines): the watchdog releases the lease at once instead of waiting for it to expire, and a row that
// runs out of attempts this way becomes Holt's WorkerFailure with those details.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('ALTER TABLE holt.agent_inbox ADD COLUMN worker_exit jsonb;');
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('ALTER TABLE holt.agent_inbox DROP COLUMN worker_exit;');
}
