import type { MigrationBuilder } from 'node-pg-migrate';

// Each role's all-time usage, rolled up as the ledger changes, so the budget check reads one row
// instead of summing every call ever made, and old ledger rows can be pruned without losing the
// total. A trigger keeps it exact through reservations, settlements and cancellations; a pruning
// transaction sets `holt.pruning` to leave the totals alone.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.llm_usage_totals (
  instance     text             NOT NULL,
  role         text             NOT NULL,
  calls        bigint           NOT NULL DEFAULT 0,
  total_tokens bigint           NOT NULL DEFAULT 0,
  cost_usd     double precision NOT NULL DEFAULT 0,
  PRIMARY KEY (instance, role)
);
INSERT INTO holt.llm_usage_totals (instance, role, calls, total_tokens, cost_usd)
  SELECT instance, role, count(*), coalesce(sum(total_tokens), 0), coalesce(sum(cost_usd), 0)
  FROM holt.llm_usage GROUP BY instance, role;

CREATE FUNCTION holt.llm_usage_roll_up() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER llm_usage_roll_up AFTER INSERT OR UPDATE OR DELETE ON holt.llm_usage
  FOR EACH ROW EXECUTE FUNCTION holt.llm_usage_roll_up();
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
DROP TRIGGER llm_usage_roll_up ON holt.llm_usage;
DROP FUNCTION holt.llm_usage_roll_up();
DROP TABLE holt.llm_usage_totals;
`);
}
