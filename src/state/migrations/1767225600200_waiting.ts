import type { MigrationBuilder } from 'node-pg-migrate';

// A turn parked on a question (an LLM agent's ask_question on a worker) waits in the inbox without a
// lease and without burning attempts: status 'waiting', `waiting_on` = the Question artefact's id. The
// watchdog wakes it (pending + doorbell) once an Answer citing that question exists.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
ALTER TABLE holt.agent_inbox DROP CONSTRAINT agent_inbox_status_check;
ALTER TABLE holt.agent_inbox ADD CONSTRAINT agent_inbox_status_check
  CHECK (status IN ('pending', 'claimed', 'waiting', 'done', 'failed'));
ALTER TABLE holt.agent_inbox ADD COLUMN waiting_on text;
CREATE INDEX agent_inbox_waiting ON holt.agent_inbox (instance) WHERE status = 'waiting';
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
DROP INDEX holt.agent_inbox_waiting;
UPDATE holt.agent_inbox SET status = 'pending', available_at = now() WHERE status = 'waiting';
ALTER TABLE holt.agent_inbox DROP COLUMN waiting_on;
ALTER TABLE holt.agent_inbox DROP CONSTRAINT agent_inbox_status_check;
ALTER TABLE holt.agent_inbox ADD CONSTRAINT agent_inbox_status_check
  CHECK (status IN ('pending', 'claimed', 'done', 'failed'));
`);
}
