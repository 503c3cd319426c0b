import type { MigrationBuilder } from 'node-pg-migrate';

// A planning agent's plan per goal (docs/runtime-model.md § Tools): the tasks and subtasks it decomposed a goal into, and how
// far it got, so a later turn on the same goal (another claim of the workflow) goes on from there.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.llm_plans (
  instance   text        NOT NULL,
  role       text        NOT NULL,
  goal_id    text        NOT NULL,
  plan       jsonb       NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (instance, role, goal_id)
);
CREATE INDEX llm_plans_updated ON holt.llm_plans (updated_at);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('DROP TABLE holt.llm_plans');
}
