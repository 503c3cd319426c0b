import type { MigrationBuilder } from 'node-pg-migrate';

// A living agent's tasks can be cancelled (src/life/tasks.ts: `holt life cancel`, `DELETE
// /v1/agents/{role}/tasks/{id}`): a cancelled wait keeps waiting, marked with who cancelled it, until
// the scheduler's next step ends it and tells the turn it starts (so no cancel goes unreported). And
// messages carry a priority (0-9, at most their token's): the scheduler feeds the higher ones first.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
ALTER TABLE holt.agent_waits ADD COLUMN cancelled_by text;
ALTER TABLE holt.agent_messages ADD COLUMN priority smallint NOT NULL DEFAULT 0
  CHECK (priority BETWEEN 0 AND 9);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`ALTER TABLE holt.agent_waits DROP COLUMN cancelled_by;
ALTER TABLE holt.agent_messages DROP COLUMN priority`);
}
