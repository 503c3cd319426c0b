import type { MigrationBuilder } from 'node-pg-migrate';

// Recall at scale (bench/memory: 100 000 memories of one agent). The vector ranking orders an agent's
// sketches by their distance to the query's: a scan of every one. On the table it read every heap page
// (a memory's row is wide: its text, its tsvector, its labels), so this index holds what that scan needs
// and nothing more: an index-only scan reads a sixth of the pages. The near-duplicate check of a save
// runs the same scan.
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
