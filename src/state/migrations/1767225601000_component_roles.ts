import type { MigrationBuilder } from 'node-pg-migrate';

// One Postgres role per component (src/access/postgres.ts grants each its tables and columns). The
// row-level rules that table grants cannot say, keyed on the pup's role by name (so they hold, and
// cost nothing, where the role does not exist: an external database's single credential):
// - the usage ledger: a pup reserves, settles and cancels its calls, so it may update and delete
//   only rows of the last hour (a call's lifetime; an older reservation settled late keeps its
//   estimate, which over-charges, never under-charges), and no amount is negative;
// - the roll-up runs as the owner (the pup gets no write on the totals), and `holt.pruning`, which
//   anyone may set, only spares the totals when rows are deleted: an insert or update always counts;
// - a finished turn's outcome is the record: a pup may only queue it again (the Redis-loss recovery,
//   which clears its artefact), never rewrite its result.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
ALTER TABLE holt.llm_usage ADD CONSTRAINT llm_usage_not_negative CHECK (prompt_tokens >= 0
  AND completion_tokens >= 0 AND total_tokens >= 0 AND cost_usd >= 0) NOT VALID;

CREATE OR REPLACE FUNCTION holt.llm_usage_roll_up() RETURNS trigger LANGUAGE plpgsql
  SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('holt.pruning', true) = 'on' THEN RETURN NULL; END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE holt.llm_usage_totals SET calls = calls - 1, total_tokens = total_tokens - OLD.total_tokens,
      cost_usd = cost_usd - OLD.cost_usd WHERE instance = OLD.instance AND role = OLD.role;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO holt.llm_usage_totals AS t (instance, role, calls, total_tokens, cost_usd)
      VALUES (NEW.instance, NEW.role, 1, NEW.total_tokens, NEW.cost_usd)
      ON CONFLICT (instance, role) DO UPDATE SET calls = t.calls + 1,
        total_tokens = t.total_tokens + EXCLUDED.total_tokens, cost_usd = t.cost_usd + EXCLUDED.cost_usd;
  END IF;
  RETURN NULL;
END $$;

ALTER TABLE holt.llm_usage ENABLE ROW LEVEL SECURITY;
CREATE POLICY llm_usage_rows ON holt.llm_usage USING (true) WITH CHECK (true);
CREATE POLICY llm_usage_pup_update ON holt.llm_usage AS RESTRICTIVE FOR UPDATE
  USING (current_user <> 'holt_pup' OR at > now() - interval '1 hour');
CREATE POLICY llm_usage_pup_delete ON holt.llm_usage AS RESTRICTIVE FOR DELETE
  USING (current_user <> 'holt_pup' OR at > now() - interval '1 hour');

CREATE FUNCTION holt.agent_turns_outcome_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_user = 'holt_pup' AND OLD.status IN ('done', 'failed')
     AND NOT (NEW.status = 'queued' AND NEW.result_artefact_id IS NULL
              AND NEW.result IS NOT DISTINCT FROM OLD.result) THEN
    RAISE EXCEPTION 'permission denied: a finished turn''s outcome is not the pup''s to rewrite'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_turns_outcome_kept BEFORE UPDATE ON holt.agent_turns
  FOR EACH ROW EXECUTE FUNCTION holt.agent_turns_outcome_kept();
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
DROP TRIGGER agent_turns_outcome_kept ON holt.agent_turns;
DROP FUNCTION holt.agent_turns_outcome_kept();
DROP POLICY llm_usage_pup_delete ON holt.llm_usage;
DROP POLICY llm_usage_pup_update ON holt.llm_usage;
DROP POLICY llm_usage_rows ON holt.llm_usage;
ALTER TABLE holt.llm_usage DISABLE ROW LEVEL SECURITY;
CREATE OR REPLACE FUNCTION holt.llm_usage_roll_up() RETURNS trigger LANGUAGE plpgsql SECURITY INVOKER AS $$
BEGIN
  IF current_setting('holt.pruning', true) = 'on' THEN RETURN NULL; END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE holt.llm_usage_totals SET calls = calls - 1, total_tokens = total_tokens - OLD.total_tokens,
      cost_usd = cost_usd - OLD.cost_usd WHERE instance = OLD.instance AND role = OLD.role;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO holt.llm_usage_totals AS t (instance, role, calls, total_tokens, cost_usd)
      VALUES (NEW.instance, NEW.role, 1, NEW.total_tokens, NEW.cost_usd)
      ON CONFLICT (instance, role) DO UPDATE SET calls = t.calls + 1,
        total_tokens = t.total_tokens + EXCLUDED.total_tokens, cost_usd = t.cost_usd + EXCLUDED.cost_usd;
  END IF;
  RETURN NULL;
END $$;
ALTER FUNCTION holt.llm_usage_roll_up() RESET search_path;
ALTER TABLE holt.llm_usage DROP CONSTRAINT llm_usage_not_negative;
`);
}
