import type { MigrationBuilder } from 'node-pg-migrate';

// The W3C trace context a living agent's wait was set in (the tool call that set it): its span is
// written when the wait ends, and the turn it wakes continues that trace.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('ALTER TABLE holt.agent_waits ADD COLUMN traceparent text, ADD COLUMN tracestate text');
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('ALTER TABLE holt.agent_waits DROP COLUMN traceparent, DROP COLUMN tracestate');
}
