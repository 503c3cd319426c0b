import type { MigrationBuilder } from 'node-pg-migrate';

// Work items (docs/runtime-model.md § Work items): an agent's durable objectives, and the one it works on now. Readiness is derived
// (src/work/items.ts), never stored.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.work_items (
  id          uuid        PRIMARY KEY,
  instance    text        NOT NULL,
  role        text        NOT NULL,
  objective   text        NOT NULL,
  state       text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'completed', 'cancelled')),
  plan_status text        NOT NULL DEFAULT 'draft' CHECK (plan_status IN ('draft', 'ready', 'needs_input')),
  todos       jsonb       NOT NULL DEFAULT '[]',
  blocked_by  jsonb       NOT NULL DEFAULT '[]',
  recheck_at  timestamptz,
  report      text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX work_items_role ON holt.work_items (instance, role, state);

CREATE TABLE holt.work_current (
  instance text NOT NULL,
  role     text NOT NULL,
  item_id  uuid NOT NULL REFERENCES holt.work_items (id) ON DELETE CASCADE,
  PRIMARY KEY (instance, role)
);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql('DROP TABLE holt.work_current, holt.work_items');
}
