import type { MigrationBuilder } from 'node-pg-migrate';

// The agent worker's durable state (docs/agent-worker.md § The inbox): inbox, per-actor turn head, turns, steps, tool waits,
// and single-consumer target leases. Every row carries `instance` so Holts may share one database.
export async function up(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
CREATE SCHEMA IF NOT EXISTS holt;

CREATE TABLE holt.agent_state_head (
  instance          text        NOT NULL,
  actor_id          uuid        NOT NULL,
  role              text        NOT NULL,
  worker_target     text        NOT NULL,
  claim_id          text        NOT NULL,
  status            text        NOT NULL DEFAULT 'idle'
                    CHECK (status IN ('idle', 'dispatched', 'running', 'suspended')),
  active_turn_id    uuid,
  turn_epoch        bigint      NOT NULL DEFAULT 0,
  lease_owner       text,
  lease_expires_at  timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (instance, actor_id)
);

CREATE TABLE holt.agent_turns (
  turn_id            uuid        PRIMARY KEY,
  instance           text        NOT NULL,
  actor_id           uuid        NOT NULL,
  claim_id           text        NOT NULL,
  role               text        NOT NULL,
  phase              text        NOT NULL,
  claim_type         text        NOT NULL,
  status             text        NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'done', 'failed')),
  turn_epoch         bigint      NOT NULL DEFAULT 0,
  result             jsonb,
  result_artefact_id uuid,
  error              text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  started_at         timestamptz,
  ended_at           timestamptz,
  FOREIGN KEY (instance, actor_id) REFERENCES holt.agent_state_head (instance, actor_id)
);
CREATE INDEX agent_turns_actor ON holt.agent_turns (instance, actor_id);

CREATE TABLE holt.agent_inbox (
  id                 bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  instance           text        NOT NULL,
  worker_target      text        NOT NULL CHECK (worker_target ~ '^[a-z0-9_-]+$'),
  actor_id           uuid        NOT NULL,
  turn_id            uuid        NOT NULL REFERENCES holt.agent_turns (turn_id),
  claim_id           text        NOT NULL,
  role               text        NOT NULL,
  claim_type         text        NOT NULL,
  phase              text        NOT NULL,
  payload            jsonb       NOT NULL DEFAULT '{}'::jsonb,
  status             text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'claimed', 'done', 'failed')),
  attempts           integer     NOT NULL DEFAULT 0,
  available_at       timestamptz NOT NULL DEFAULT now(),
  lease_owner        text,
  lease_expires_at   timestamptz,
  turn_epoch         bigint      NOT NULL DEFAULT 0,
  last_error         text,
  failure_reported   boolean     NOT NULL DEFAULT false,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  UNIQUE (instance, claim_id, role, phase)
);
-- Claiming scans due pending rows of a target; the watchdog scans expired leases.
CREATE INDEX agent_inbox_due ON holt.agent_inbox (instance, worker_target, available_at, id)
  WHERE status = 'pending';
CREATE INDEX agent_inbox_leases ON holt.agent_inbox (lease_expires_at) WHERE status = 'claimed';
CREATE INDEX agent_inbox_failed ON holt.agent_inbox (instance) WHERE status = 'failed' AND NOT failure_reported;

CREATE TABLE holt.agent_steps (
  step_id       uuid        PRIMARY KEY,
  instance      text        NOT NULL,
  actor_id      uuid        NOT NULL,
  turn_id       uuid        NOT NULL REFERENCES holt.agent_turns (turn_id),
  turn_epoch    bigint      NOT NULL,
  seq           integer     NOT NULL,
  kind          text        NOT NULL,
  status        text        NOT NULL DEFAULT 'completed',
  tool_call_ids jsonb       NOT NULL DEFAULT '[]'::jsonb,
  metadata      jsonb       NOT NULL DEFAULT '{}'::jsonb,
  error         text,
  started_at    timestamptz NOT NULL DEFAULT now(),
  ended_at      timestamptz,
  UNIQUE (turn_id, seq)
);

CREATE TABLE holt.turn_waiting_tools (
  instance        text        NOT NULL,
  actor_id        uuid        NOT NULL,
  turn_id         uuid        NOT NULL REFERENCES holt.agent_turns (turn_id),
  turn_epoch      bigint      NOT NULL,
  tool_call_id    text        NOT NULL,
  step_id         uuid,
  tool_name       text        NOT NULL,
  wait_status     text        NOT NULL DEFAULT 'waiting'
                  CHECK (wait_status IN ('waiting', 'received', 'applied', 'expired', 'dropped')),
  result          jsonb,
  resume_deadline timestamptz,
  received_at     timestamptz,
  applied_at      timestamptz,
  PRIMARY KEY (turn_id, tool_call_id)
);

CREATE TABLE holt.target_leases (
  instance      text        NOT NULL,
  worker_target text        NOT NULL,
  owner         text        NOT NULL,
  expires_at    timestamptz NOT NULL,
  PRIMARY KEY (instance, worker_target)
);
`);
}

export async function down(pgm: MigrationBuilder): Promise<void> {
  pgm.sql(`
DROP TABLE holt.target_leases, holt.turn_waiting_tools, holt.agent_steps, holt.agent_inbox,
  holt.agent_turns, holt.agent_state_head;
`);
}
