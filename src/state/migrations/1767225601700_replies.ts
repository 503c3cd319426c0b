import type { MigrationBuilder } from 'node-pg-migrate';

// Delivery to whoever asked (docs/agents.md § Delivery): a message may name a callback its token
// registered, and the outcome of what it started (the report of the work item its turn made, or the
// turn's final text) is POSTed there, signed, retried, once per delivery id. A reply row is written with
// its message, in the same transaction, so no outcome is lost to a crash between the two. A work item
// remembers the turn that made it, so the outcome of a message can be followed to it.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
ALTER TABLE holt.work_items ADD COLUMN created_by_turn uuid;
CREATE INDEX work_items_created_by_turn ON holt.work_items (created_by_turn) WHERE created_by_turn IS NOT NULL;

CREATE TABLE holt.message_replies (
  id           uuid        PRIMARY KEY,
  instance     text        NOT NULL,
  role         text        NOT NULL,
  message_id   bigint      NOT NULL,
  token_name   text        NOT NULL,
  callback     text        NOT NULL,
  url          text        NOT NULL,
  status       text        NOT NULL DEFAULT 'pending'
               CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts     integer     NOT NULL DEFAULT 0,
  next_at      timestamptz NOT NULL DEFAULT now(),
  outcome      jsonb,
  last_status  integer,
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  UNIQUE (message_id)
);
CREATE INDEX message_replies_due ON holt.message_replies (next_at) WHERE status = 'pending';
CREATE INDEX message_replies_role ON holt.message_replies (instance, role, created_at);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`DROP TABLE holt.message_replies;
ALTER TABLE holt.work_items DROP COLUMN created_by_turn`);
}
