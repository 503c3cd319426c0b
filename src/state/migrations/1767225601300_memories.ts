import type { MigrationBuilder } from 'node-pg-migrate';

// Agents that remember (docs/agents.md § Memory): what an agent did, saw and concluded, kept past its
// turns, recalled by meaning and by words. A memory is the agent's own (scope `agent`) or its whole
// Holt's (`holt`); it keeps where it came from (its source, the provenance labels and the authority of
// what it was drawn from: a webhook's content stays external evidence), how often it was recalled, and
// when it expires. Full-text search over `tsv`; vectors as `real[]` (pgvector is optional) with a
// 256-bit SimHash `sketch` for the coarse scan that plain Postgres can run fast (bit_count of a XOR).
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.agent_memories (
  id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  instance       text        NOT NULL,
  scope          text        NOT NULL CHECK (scope IN ('agent', 'holt')),
  role           text        NOT NULL,
  kind           text        NOT NULL CHECK (kind IN ('action', 'observation', 'report', 'note')),
  body           text        NOT NULL,
  tsv            tsvector    GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
  body_key       text        NOT NULL,
  embedding      real[],
  embedding_model text,
  sketch         bit(256),
  source_kind    text        NOT NULL
                 CHECK (source_kind IN ('turn', 'artefact', 'work_item', 'message', 'operator')),
  source_id      text,
  labels         jsonb       NOT NULL,
  authority      text        NOT NULL,
  merged         integer     NOT NULL DEFAULT 0,
  uses           integer     NOT NULL DEFAULT 0,
  last_used_at   timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz
);
CREATE INDEX agent_memories_tsv ON holt.agent_memories USING gin (tsv);
CREATE INDEX agent_memories_owner ON holt.agent_memories (instance, role, created_at);
CREATE UNIQUE INDEX agent_memories_key ON holt.agent_memories
  (instance, scope, (CASE WHEN scope = 'agent' THEN role ELSE '' END), body_key);
CREATE INDEX agent_memories_expiry ON holt.agent_memories (instance, expires_at) WHERE expires_at IS NOT NULL;
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('DROP TABLE holt.agent_memories');
}
