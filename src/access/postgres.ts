import pg from 'pg';
import { withClient } from '../common/pg.ts';
import {
  PG_COMPONENTS,
  PG_LEGACY_APP,
  PG_OWNER,
  PG_ROLE,
  type PgComponent,
  type PgPasswords,
} from './pg-roles.ts';

/**
 * Holt's database roles: the schema's owner (migrations) and one per component that connects, each
 * with the table and column privileges its own SQL needs (docs/security.md). `holt_app`, the single
 * runtime role of earlier versions, is disabled when found (its grants go, it may no longer log in).
 */
export {
  PG_COMPONENTS,
  PG_LEGACY_APP,
  PG_OPERATOR,
  PG_ORCHESTRATOR,
  PG_OWNER,
  PG_PUP,
  PG_ROLE,
  type PgComponent,
  type PgPasswords,
  pgPasswordEnv,
} from './pg-roles.ts';

/**
 * Run as a superuser once the database exists: the owner and the components' roles, none a superuser,
 * with `owner` owning the database and its public schema. Idempotent (passwords are reset to the ones
 * given). Never `COPY ... PROGRAM` for any of them.
 */
export function roleStatements(database: string, pw: PgPasswords): string[] {
  const id = pg.escapeIdentifier;
  const lit = pg.escapeLiteral;
  const role = (name: string) =>
    `DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = ${lit(name)}) THEN CREATE ROLE ${id(name)} LOGIN; END IF; END $$`;
  const login = (name: string, password: string) =>
    `ALTER ROLE ${id(name)} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD ${lit(password)}`;
  const owner = id(PG_OWNER);
  return [
    role(PG_OWNER),
    ...PG_COMPONENTS.map((c) => role(PG_ROLE[c])),
    login(PG_OWNER, pw.owner),
    ...PG_COMPONENTS.map((c) => login(PG_ROLE[c], pw[c])),
    `DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = ${lit(PG_LEGACY_APP)}) THEN ALTER ROLE ${id(PG_LEGACY_APP)} NOLOGIN; END IF; END $$`,
    `ALTER DATABASE ${id(database)} OWNER TO ${owner}`,
    `REVOKE ALL ON DATABASE ${id(database)} FROM PUBLIC`,
    ...PG_COMPONENTS.map((c) => `GRANT CONNECT ON DATABASE ${id(database)} TO ${id(PG_ROLE[c])}`),
  ];
}

/** Run in the database itself (as a superuser): nobody but the owner creates anything in public. */
export function schemaStatements(): string[] {
  const owner = pg.escapeIdentifier(PG_OWNER);
  return [
    `ALTER SCHEMA public OWNER TO ${owner}`,
    'REVOKE CREATE ON SCHEMA public FROM PUBLIC',
    ...PG_COMPONENTS.map((c) => `GRANT USAGE ON SCHEMA public TO ${pg.escapeIdentifier(PG_ROLE[c])}`),
  ];
}

/** A table's grants: privilege → columns (undefined = the whole table). */
type Grants = Partial<Record<'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE', readonly string[] | undefined>>;
const ALL = undefined;

/**
 * What each component writes, from the SQL of its stores (a new table or column gets its line here,
 * or nobody but the owner can use it). The orchestrator enqueues grants, runs the watchdog and
 * retention, and hosts the ingress (the only writer of agent messages); pups and workers run turns
 * under their fences; the operator's autoscaler reads the inbox's depth and nothing else.
 */
export const TABLE_GRANTS: Record<PgComponent, Record<string, Grants>> = {
  orchestrator: {
    pgmigrations: { SELECT: ALL },
    agent_state_head: { SELECT: ALL, INSERT: ALL, UPDATE: ALL, DELETE: ALL },
    agent_turns: { SELECT: ALL, INSERT: ALL, UPDATE: ALL, DELETE: ALL },
    agent_inbox: { SELECT: ALL, INSERT: ALL, UPDATE: ALL, DELETE: ALL },
    agent_steps: { SELECT: ALL, DELETE: ALL },
    // An operator's cancel through the ingress gives a waiting call its cancellation report (life/tasks.ts).
    turn_waiting_tools: { SELECT: ALL, UPDATE: ['wait_status', 'result', 'received_at'], DELETE: ALL },
    llm_usage: { SELECT: ALL, DELETE: ALL },
    llm_plans: { SELECT: ALL, DELETE: ALL },
    // Retention: expired memories go (src/state/retention.ts).
    agent_memories: { SELECT: ALL, DELETE: ALL },
    agent_life: { SELECT: ALL, INSERT: ['instance', 'role'], UPDATE: ['last_message_at'] },
    agent_messages: {
      SELECT: ALL,
      INSERT: [
        'instance',
        'role',
        'idempotency_key',
        'kind',
        'body',
        'labels',
        'traceparent',
        'tracestate',
        'priority',
      ],
      DELETE: ALL,
    },
    ingress_idempotency: { SELECT: ALL, INSERT: ALL, DELETE: ALL },
    // Delivery to callbacks: a reply queued with its message, its attempts recorded (life/replies.ts);
    // a message's outcome is followed into the work item its turn made.
    message_replies: { SELECT: ALL, INSERT: ALL, UPDATE: ALL, DELETE: ALL },
    // A2A tasks (src/a2a/store.ts): made, followed and cancelled by the ingress.
    a2a_tasks: { SELECT: ALL, INSERT: ALL, UPDATE: ALL, DELETE: ALL },
    work_items: { SELECT: ALL },
    // A cancel marks a wait (the scheduler ends it) and is audited.
    agent_waits: { SELECT: ALL, UPDATE: ['cancelled_by'], DELETE: ALL },
    life_turns: { SELECT: ALL, DELETE: ALL },
    life_audit: { SELECT: ALL, INSERT: ALL, DELETE: ALL },
  },
  pup: {
    pgmigrations: { SELECT: ALL },
    agent_state_head: {
      SELECT: ALL,
      INSERT: ['instance', 'actor_id', 'role', 'worker_target', 'claim_id'],
      UPDATE: ['status', 'active_turn_id', 'turn_epoch', 'lease_owner', 'lease_expires_at', 'updated_at'],
    },
    agent_turns: {
      SELECT: ALL,
      INSERT: [
        'turn_id',
        'instance',
        'actor_id',
        'claim_id',
        'role',
        'phase',
        'claim_type',
        'status',
        'started_at',
      ],
      UPDATE: ['status', 'turn_epoch', 'result', 'result_artefact_id', 'error', 'started_at', 'ended_at'],
    },
    // No INSERT: only the orchestrator grants work. The payload and the exit reports are not the pup's.
    agent_inbox: {
      SELECT: ALL,
      UPDATE: [
        'status',
        'attempts',
        'lease_owner',
        'lease_expires_at',
        'turn_epoch',
        'last_error',
        'available_at',
        'waiting_on',
        'updated_at',
      ],
    },
    agent_steps: { SELECT: ALL, INSERT: ALL, UPDATE: ALL },
    turn_waiting_tools: { SELECT: ALL, INSERT: ALL, UPDATE: ALL },
    target_leases: { SELECT: ALL, INSERT: ALL, UPDATE: ALL, DELETE: ALL },
    // Reserve, settle, cancel: its recent rows only (row-level security, migration component_roles).
    llm_usage: {
      SELECT: ALL,
      INSERT: [
        'instance',
        'role',
        'turn_id',
        'purpose',
        'prompt_tokens',
        'completion_tokens',
        'total_tokens',
        'cost_usd',
      ],
      UPDATE: ['prompt_tokens', 'completion_tokens', 'total_tokens', 'cost_usd'],
      DELETE: ALL,
    },
    llm_usage_totals: { SELECT: ALL },
    llm_memory: { SELECT: ALL, INSERT: ALL, UPDATE: ALL },
    llm_plans: { SELECT: ALL, INSERT: ALL, UPDATE: ALL },
    // An agent saves, recalls (counted) and consolidates its memories; forgetting is the operator's.
    agent_memories: { SELECT: ALL, INSERT: ALL, UPDATE: ALL },
    work_items: { SELECT: ALL, INSERT: ALL, UPDATE: ALL },
    work_current: { SELECT: ALL, INSERT: ALL, UPDATE: ALL, DELETE: ALL },
    agent_life: {
      SELECT: ALL,
      INSERT: ['instance', 'role'],
      UPDATE: ['turn_seq', 'last_turn_at', 'updated_at'],
    },
    // Delivered (and handed back); written only as a work hand-off to another agent (a trigger holds
    // the pup to that: migration handoffs): what an agent is told otherwise comes from the ingress.
    agent_messages: {
      SELECT: ALL,
      INSERT: ['instance', 'role', 'idempotency_key', 'kind', 'body', 'labels'],
      UPDATE: ['turn_id', 'delivered_at', 'deliveries'],
    },
    agent_waits: { SELECT: ALL, INSERT: ALL, UPDATE: ['state', 'ended_at', 'turn_id', 'deliveries'] },
    life_turns: { SELECT: ALL, INSERT: ALL },
    life_audit: { SELECT: ALL, INSERT: ALL },
  },
  operator: {
    // The backlog's counts and pending claims; not the payloads, errors or exit reports.
    agent_inbox: {
      SELECT: [
        'instance',
        'worker_target',
        'status',
        'available_at',
        'lease_owner',
        'claim_id',
        'turn_epoch',
      ],
    },
  },
};

/**
 * One component's GRANT statements, after revoking what an earlier version granted; only on the
 * tables that exist (`tables`), so a grant never names a table before its migration ran.
 */
export function componentGrants(who: PgComponent, tables: ReadonlySet<string>): string[] {
  const r = pg.escapeIdentifier(PG_ROLE[who]);
  const out = [
    `REVOKE ALL ON ALL TABLES IN SCHEMA holt FROM ${r}`,
    `REVOKE ALL ON ALL SEQUENCES IN SCHEMA holt FROM ${r}`,
    `GRANT USAGE ON SCHEMA holt TO ${r}`,
  ];
  for (const [table, grants] of Object.entries(TABLE_GRANTS[who]).filter(([t]) => tables.has(t)))
    for (const [priv, cols] of Object.entries(grants)) {
      const on = cols ? `${priv} (${cols.map((c) => pg.escapeIdentifier(c)).join(', ')})` : priv;
      out.push(`GRANT ${on} ON holt.${pg.escapeIdentifier(table)} TO ${r}`);
    }
  // Identity columns draw from their sequences.
  if (who !== 'operator') out.push(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA holt TO ${r}`);
  return out;
}

/**
 * Run by the owner after migrating, in one transaction (a running component never sees its grants
 * missing): each component role that exists gets exactly its grants; the legacy `holt_app` loses
 * its own. Nothing for a database without these roles (external: one credential for all).
 */
export async function applyGrants(c: pg.ClientBase): Promise<void> {
  const r = await c.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY($1)', [
    [...PG_COMPONENTS.map((x) => PG_ROLE[x]), PG_LEGACY_APP],
  ]);
  const have = new Set(r.rows.map((x) => x.rolname));
  const t = await c.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = 'holt'");
  const tables = new Set(t.rows.map((x) => x.tablename));
  const statements = PG_COMPONENTS.filter((x) => have.has(PG_ROLE[x])).flatMap((x) =>
    componentGrants(x, tables),
  );
  if (have.has(PG_LEGACY_APP)) {
    const a = pg.escapeIdentifier(PG_LEGACY_APP);
    statements.push(
      `REVOKE ALL ON ALL TABLES IN SCHEMA holt FROM ${a}`,
      `REVOKE ALL ON ALL SEQUENCES IN SCHEMA holt FROM ${a}`,
      `ALTER DEFAULT PRIVILEGES IN SCHEMA holt REVOKE ALL ON TABLES FROM ${a}`,
      `ALTER DEFAULT PRIVILEGES IN SCHEMA holt REVOKE ALL ON SEQUENCES FROM ${a}`,
    );
  }
  if (!statements.length) return;
  await c.query('BEGIN');
  try {
    // Concurrent migrators (they race safely) would otherwise collide on the same catalogue rows.
    await c.query("SELECT pg_advisory_xact_lock(hashtext('holt-grants'))");
    for (const sql of statements) await c.query(sql);
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}

/** Applies the roles and schema grants with a superuser's URL (the bundled stores' set-up). */
export async function ensureRoles(superUrl: string, database: string, passwords: PgPasswords): Promise<void> {
  const run = (url: string, statements: string[]) =>
    withClient(url, async (c) => {
      for (const sql of statements) await c.query(sql);
    });
  await run(superUrl, roleStatements(database, passwords));
  const inDb = new URL(superUrl);
  inDb.pathname = `/${database}`;
  await run(inDb.toString(), schemaStatements());
}

/** A role's URL on the same server and database as `url`. */
export function pgUrlAs(url: string, role: string, password: string): string {
  const u = new URL(url);
  u.username = role;
  u.password = password;
  return u.toString();
}
