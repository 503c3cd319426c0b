import type { MigrationBuilder } from 'node-pg-migrate';

// Recall at scale (bench/memory: 100 000 memories of one agent). The vector ranking's coarse scan runs
// over every sketch of an instance, held in the searching process (src/memory/sketch-index.ts) and read
// from here: whole at its load, by id since at each search. A memory's row is wide (its text, its
// tsvector, its labels), so this index holds what those reads need and nothing more: an index-only scan
// reads a sixth of the pages the table would.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE INDEX agent_memories_sketch ON holt.agent_memories (instance, embedding_model)
  INCLUDE (id, sketch, scope, role, kind, expires_at, uses) WHERE sketch IS NOT NULL;
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`DROP INDEX holt.agent_memories_sketch;
ALTER TABLE holt.agent_memories ALTER COLUMN embedding SET STORAGE EXTENDED`);
}
