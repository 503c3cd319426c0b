import type { MigrationBuilder } from 'node-pg-migrate';

// The ingress's idempotency keys, per token and kept far longer than the messages they admitted
// (HOLT_INGRESS_IDEMPOTENCY_DAYS): only a hash of each key, with the id of the message it queued, so a
// replay is refused after the message itself is pruned, and one token's key never answers another's.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.ingress_idempotency (
  instance   text        NOT NULL,
  role       text        NOT NULL,
  token_id   text        NOT NULL,
  key_hash   text        NOT NULL,
  message_id bigint      NOT NULL,
  seen_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (instance, role, token_id, key_hash)
);
CREATE INDEX ingress_idempotency_seen ON holt.ingress_idempotency (instance, seen_at);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('DROP TABLE holt.ingress_idempotency');
}
