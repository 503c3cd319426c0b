import type { MigrationBuilder } from 'node-pg-migrate';

// A2A tasks of living agents (docs/agents.md § Reaching agents over A2A): one row per task a caller
// started with message/send or message/stream. Its state is followed from the message it queued (as a
// delivery's is, life/outcome.ts) and kept here once final, so it outlives the message's retention.
// A task is its token's: another token of the same agent does not see it. The A2A message id is the
// message's idempotency key, so a resent message finds its task again.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.a2a_tasks (
  id           uuid        PRIMARY KEY,
  instance     text        NOT NULL,
  role         text        NOT NULL,
  token_name   text        NOT NULL,
  context_id   text        NOT NULL,
  message_id   bigint      NOT NULL,
  history      jsonb       NOT NULL DEFAULT '[]',
  outcome      jsonb,
  cancelled_by text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (message_id)
);
CREATE INDEX a2a_tasks_owner ON holt.a2a_tasks (instance, role, token_name, updated_at DESC);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('DROP TABLE holt.a2a_tasks');
}
