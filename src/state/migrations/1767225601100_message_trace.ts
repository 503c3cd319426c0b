import type { MigrationBuilder } from 'node-pg-migrate';

// The W3C trace context a message came with (the ingress's `traceparent` header): the life turn it
// wakes continues that trace. Empty for a message sent without one.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('ALTER TABLE holt.agent_messages ADD COLUMN traceparent text, ADD COLUMN tracestate text');
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('ALTER TABLE holt.agent_messages DROP COLUMN traceparent, DROP COLUMN tracestate');
}
