import type { MigrationBuilder } from 'node-pg-migrate';

// The claim+complete hot path writes fewer index entries. Each execution updates the inbox row twice
// (claimed, done), the head twice and the turn once:
// - the inbox row's uniqueness is its turn (the turn id is derived from (instance, claim, role, phase),
//   so a unique turn id is the same rule) on one narrow uuid key instead of four text columns; it also
//   serves enqueue's lookup of an already dispatched grant by turn id, which was a sequential scan;
// - free room on the pages of the head and the turn, so their updates (no indexed column changes)
//   stay heap-only (HOT) instead of adding index entries when a page is full;
// - room on the inbox's pages too: its updates change `status` (in the partial indexes' predicates),
//   so they cannot be HOT, but the new version stays on the row's page (one page dirtied, no extension).
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE UNIQUE INDEX agent_inbox_turn ON holt.agent_inbox (turn_id);
ALTER TABLE holt.agent_inbox DROP CONSTRAINT agent_inbox_instance_claim_id_role_phase_key;
ALTER TABLE holt.agent_state_head SET (fillfactor = 70);
ALTER TABLE holt.agent_turns SET (fillfactor = 70);
ALTER TABLE holt.agent_inbox SET (fillfactor = 50);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
ALTER TABLE holt.agent_inbox RESET (fillfactor);
ALTER TABLE holt.agent_turns RESET (fillfactor);
ALTER TABLE holt.agent_state_head RESET (fillfactor);
ALTER TABLE holt.agent_inbox ADD CONSTRAINT agent_inbox_instance_claim_id_role_phase_key
  UNIQUE (instance, claim_id, role, phase);
DROP INDEX holt.agent_inbox_turn;
`);
}
