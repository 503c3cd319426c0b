import type { MigrationBuilder } from 'node-pg-migrate';

// A pup hands an unfinished work item to another living agent (`work_handoff`, src/life/handoff.ts):
// the item moves, and the other agent gets a message saying so. The pup may now queue a message, but
// only that one kind: from another agent, a signal to weigh, never an operator's or the runtime's
// words (what an agent is told otherwise still comes from the ingress and the scheduler alone).
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE FUNCTION holt.agent_messages_pup_handoff_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_user = 'holt_pup' AND NOT (
       NEW.kind = 'message' AND NEW.idempotency_key LIKE 'handoff:%'
       AND NEW.labels->>'origin' = 'agent' AND NEW.labels->>'authority' = 'integration_signal'
       AND NEW.labels->>'surface' LIKE 'work_handoff from %') THEN
    RAISE EXCEPTION 'permission denied: a pup queues only work hand-offs'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_messages_pup_handoff_only BEFORE INSERT ON holt.agent_messages
  FOR EACH ROW EXECUTE FUNCTION holt.agent_messages_pup_handoff_only();
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
DROP TRIGGER agent_messages_pup_handoff_only ON holt.agent_messages;
DROP FUNCTION holt.agent_messages_pup_handoff_only();
`);
}
