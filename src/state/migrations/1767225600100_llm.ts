import type { MigrationBuilder } from 'node-pg-migrate';

// The LLM agent loop's additions (src/llm): a usage ledger per role (rolling-window and total-cost
// budgets shared by every pup of the role, bids included) and each role's bounded working memory.
// Turns and steps themselves live in holt.agent_turns / holt.agent_steps.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.llm_usage (
  id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  instance          text        NOT NULL,
  role              text        NOT NULL,
  turn_id           uuid,
  purpose           text        NOT NULL CHECK (purpose IN ('bid', 'turn', 'plan')),
  at                timestamptz NOT NULL DEFAULT now(),
  prompt_tokens     integer     NOT NULL DEFAULT 0,
  completion_tokens integer     NOT NULL DEFAULT 0,
  total_tokens      integer     NOT NULL DEFAULT 0,
  cost_usd          double precision NOT NULL DEFAULT 0
);
CREATE INDEX llm_usage_role_at ON holt.llm_usage (instance, role, at);

CREATE TABLE holt.llm_memory (
  instance   text        NOT NULL,
  role       text        NOT NULL,
  content    text        NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (instance, role)
);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('DROP TABLE holt.llm_memory, holt.llm_usage;');
}
