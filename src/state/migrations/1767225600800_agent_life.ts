import type { MigrationBuilder } from 'node-pg-migrate';

// Agents that live (docs/runtime-model.md § Living agents): the messages and wake hints that reach an agent from outside, with the
// provenance labels the ingress set; the waits it sleeps on (timers, messages, operator answers) with
// deadlines; each life turn's delivery (what woke it); and the scheduler's audit trail. Per role:
// one life actor per agent, fenced like every other turn (agent_state_head).
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE TABLE holt.agent_life (
  instance        text        NOT NULL,
  role            text        NOT NULL,
  state           text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'stopped')),
  turn_seq        integer     NOT NULL DEFAULT 0,
  last_turn_at    timestamptz,
  last_message_at timestamptz,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (instance, role)
);

CREATE TABLE holt.agent_messages (
  id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  instance        text        NOT NULL,
  role            text        NOT NULL,
  idempotency_key text        NOT NULL,
  kind            text        NOT NULL CHECK (kind IN ('message', 'wake')),
  body            text,
  labels          jsonb       NOT NULL,
  turn_id         uuid,
  deliveries      integer     NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz,
  UNIQUE (instance, role, idempotency_key)
);
CREATE INDEX agent_messages_undelivered ON holt.agent_messages (instance, role, id) WHERE turn_id IS NULL;

CREATE TABLE holt.agent_waits (
  id          uuid        PRIMARY KEY,
  instance    text        NOT NULL,
  role        text        NOT NULL,
  item_id     uuid        REFERENCES holt.work_items (id) ON DELETE SET NULL,
  kind        text        NOT NULL CHECK (kind IN ('timer', 'message', 'operator')),
  on_what     text        NOT NULL,
  deadline    timestamptz,
  state       text        NOT NULL DEFAULT 'waiting'
              CHECK (state IN ('waiting', 'resolved', 'timed_out', 'cancelled')),
  set_by_turn uuid,
  turn_id     uuid,
  deliveries  integer     NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now(),
  ended_at    timestamptz
);
CREATE INDEX agent_waits_open ON holt.agent_waits (instance, role) WHERE state = 'waiting';

CREATE TABLE holt.life_turns (
  turn_id    uuid        PRIMARY KEY,
  instance   text        NOT NULL,
  role       text        NOT NULL,
  seq        integer     NOT NULL,
  delivery   jsonb       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (instance, role, seq)
);

CREATE TABLE holt.life_audit (
  id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  instance text        NOT NULL,
  role     text        NOT NULL,
  decision text        NOT NULL,
  detail   jsonb       NOT NULL DEFAULT '{}',
  at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX life_audit_role ON holt.life_audit (instance, role, id);

-- Asynchronous tools: what a waiting call asked, so a restarted pup can say what it waits for.
ALTER TABLE holt.turn_waiting_tools ADD COLUMN request jsonb;
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`ALTER TABLE holt.turn_waiting_tools DROP COLUMN request;
DROP TABLE holt.life_audit, holt.life_turns, holt.agent_waits, holt.agent_messages, holt.agent_life`);
}
