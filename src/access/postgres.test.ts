import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres } from '../../test/harness/postgres.ts';
import { readLiving } from '../console/life.ts';
import { readSteps } from '../console/workflow.ts';
import { InboxStore } from '../inbox/store.ts';
import { labelsOf } from '../life/labels.ts';
import { LifeStore } from '../life/store.ts';
import { LifeTasks } from '../life/tasks.ts';
import { UsageStore } from '../llm/stores/usage-store.ts';
import { PostgresBacklogReader } from '../operator/autoscale/backlog.ts';
import { migrate } from '../state/migrate.ts';
import { pruneFinished } from '../state/retention.ts';
import { fenceOf } from '../state/schema.ts';
import { StepStore } from '../state/steps.ts';
import {
  ensureRoles,
  PG_COMPONENTS,
  PG_LEGACY_APP,
  PG_OWNER,
  PG_ROLE,
  type PgComponent,
  type PgPasswords,
  pgUrlAs,
  TABLE_GRANTS,
} from './postgres.ts';

/** What the Postgres tests close at the end (pools of each role). */
const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

describe('Postgres roles', () => {
  const pws: PgPasswords = {
    owner: 'owner-password-0123456789',
    orchestrator: 'orchestrator-password-0123',
    pup: 'pup-password-0123456789abc',
    operator: 'operator-password-0123456',
  };
  const legacy = 'legacy-app-password-012345';
  let superUrl = '';
  const url = (who: PgComponent) => pgUrlAs(superUrl, PG_ROLE[who], pws[who]);
  const pools = new Map<PgComponent, pg.Pool>();
  const as = (who: PgComponent) => {
    let p = pools.get(who);
    if (!p) {
      p = new pg.Pool({ connectionString: url(who), max: 3 });
      // pool.end() does not wait for its sockets to close: the server stopping next must not throw.
      p.on('error', () => undefined);
      pools.set(who, p);
      const made = p;
      cleanup.push(() => made.end());
    }
    return p;
  };
  const sql = (who: PgComponent, text: string, values: unknown[] = []) => as(who).query(text, values);
  const admin = (text: string, values: unknown[] = []) =>
    withClientOf(superUrl, (c) => c.query(text, values));
  const withClientOf = async <T>(u: string, fn: (c: pg.Client) => Promise<T>) => {
    const c = new pg.Client({ connectionString: u });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  const refused = (p: Promise<unknown>) => expect(p).rejects.toThrow(/permission denied/);
  const P = 'pgacl';
  const grant = {
    instance: P,
    workerTarget: 'writer',
    role: 'Writer',
    claimType: 'exclusive',
    phase: 'exclusive',
  } as const;

  beforeAll(async () => {
    const server = await startPostgres({ database: 'holt' });
    cleanup.push(() => server.stop());
    superUrl = server.url;
    // A database of an earlier version: one runtime role with DML on everything.
    await admin(`CREATE ROLE ${PG_LEGACY_APP} LOGIN PASSWORD '${legacy}'`);
    await ensureRoles(superUrl, 'holt', pws);
    await migrate(pgUrlAs(superUrl, PG_OWNER, pws.owner));
  });

  it('no component role is a superuser, makes or drops anything, runs a program, or writes the migration history', async () => {
    for (const who of PG_COMPONENTS) {
      const r = await sql(who, 'SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user');
      expect(r.rows[0], who).toEqual({ rolsuper: false, rolbypassrls: false });
      await expect(sql(who, 'CREATE TABLE holt.evil (x int)')).rejects.toThrow(/permission denied/);
      await expect(sql(who, 'CREATE TABLE public.evil (x int)')).rejects.toThrow(/permission denied/);
      await expect(sql(who, 'DROP TABLE holt.agent_inbox')).rejects.toThrow(/must be owner/);
      await expect(sql(who, "COPY holt.agent_inbox TO PROGRAM 'id'")).rejects.toThrow(
        /permission denied|must be superuser|pg_execute_server_program/,
      );
      await expect(sql(who, 'DELETE FROM holt.pgmigrations')).rejects.toThrow(/permission denied/);
    }
  });

  it('every table of schema holt is granted to some component (a table left out would be the owner’s alone)', async () => {
    const r = await admin("SELECT tablename FROM pg_tables WHERE schemaname = 'holt' ORDER BY tablename");
    const granted = new Set(PG_COMPONENTS.flatMap((c) => Object.keys(TABLE_GRANTS[c])));
    expect(
      r.rows.map((x: { tablename: string }) => x.tablename).filter((t: string) => !granted.has(t)),
    ).toEqual([]);
  });

  it("the earlier version's single runtime role may no longer log in, and holds no grant", async () => {
    await expect(
      withClientOf(pgUrlAs(superUrl, PG_LEGACY_APP, legacy), (c) => c.query('SELECT 1')),
    ).rejects.toThrow(/not permitted to log in/);
    const r = await admin("SELECT has_table_privilege($1, 'holt.agent_messages', 'INSERT') AS can", [
      PG_LEGACY_APP,
    ]);
    expect(r.rows[0]).toEqual({ can: false });
  });

  it('each component does its own work with its own role: the orchestrator queues and prunes, the ingress queues messages, the pup runs turns and books usage, the operator reads the backlog', async () => {
    const orch = new InboxStore(as('orchestrator'));
    const pup = new InboxStore(as('pup'));
    const { created } = await orch.enqueue({ ...grant, claimId: 'c1', payload: { task: 'write' } });
    expect(created).toBe(true);
    const backlog = new PostgresBacklogReader(async () => url('operator'));
    cleanup.push(() => backlog.close());
    const target = { namespace: 'ns', holt: P, target: 'writer' };
    expect((await backlog.depth(target)).pending).toBe(1);
    expect(await backlog.pendingClaims(target, 5)).toEqual([{ claimId: 'c1', epoch: 0 }]);
    // The claim Jobs' clean-up asks which claims are still pending (its own columns only).
    expect(await backlog.pendingOf(target, ['c1', 'c9'])).toEqual([{ claimId: 'c1', epoch: 0 }]);
    const [row] = await pup.claim(P, ['writer'], 'pod-1', 1, 60_000);
    expect(row?.payload).toEqual({ task: 'write' });
    const f = fenceOf(row!);
    expect([...(await pup.renew('pod-1', [f], 60_000))]).toEqual([row!.id]);
    await pup.complete(f, { value: 'ok' });
    expect((await orch.turn(f.turnId))?.status).toBe('done');
    expect(await orch.queueDepth(P)).toEqual([]);
    expect(await orch.wake(P, ['q1'])).toEqual([]);

    // The ingress (in the orchestrator) queues an operator's message; the pup's life turn receives it.
    const ingress = new LifeStore(as('orchestrator'));
    const q = await ingress.enqueue({
      instance: P,
      role: 'Writer',
      key: 'k1',
      kind: 'message',
      body: 'ship it',
      labels: labelsOf('operator', 'message', 'POST /v1/agents/Writer/messages', 'token ops'),
    });
    expect(q.kind).toBe('queued');
    const life = new LifeStore(as('pup'));
    const step = await life.step(P, 'Writer', 'pod-1', 60_000);
    expect(step.decision.kind).toBe('start');
    expect(step.delivery?.messageIds).toHaveLength(1);
    await life.finish(step.fence!, { status: 'done' });

    // The pup books, settles and cancels its calls.
    const usage = new UsageStore(as('pup'));
    const est = { promptTokens: 10, completionTokens: 10, totalTokens: 20 };
    const ok = () => ({ ok: true as const });
    const a = await usage.reserve(P, 'Writer', null, 'turn', 60_000, est, 0.5, ok);
    await usage.settle(a.id!, { promptTokens: 5, completionTokens: 5, totalTokens: 10 }, 0.25);
    const b = await usage.reserve(P, 'Writer', null, 'turn', 60_000, est, 0.5, ok);
    await usage.cancel(b.id!);
    expect((await usage.ledger(P, 'Writer', 60_000)).totalCostUsd).toBe(0.25);

    // Retention, as the orchestrator, removes what is finished.
    const pruned = await pruneFinished(as('orchestrator'), P, 0);
    expect(pruned.turns).toBeGreaterThanOrEqual(1);
  });

  it("the ingress (the orchestrator's role) lists and cancels an agent's tasks: its wait and its call", async () => {
    const life = new LifeStore(as('pup'));
    await new LifeStore(as('orchestrator')).enqueue({
      instance: P,
      role: 'Tasker',
      key: 't1',
      kind: 'message',
      body: 'wait, then look it up',
      labels: labelsOf('operator', 'message', 'POST /v1/agents/Tasker/messages', 'token ops'),
    });
    const step = await life.step(P, 'Tasker', 'pod-1', 60_000);
    const f = step.fence!;
    await life.addWait(f, 'Tasker', { kind: 'operator', on: 'a go-ahead' });
    await new StepStore(as('pup')).waitTool(f, {
      toolCallId: 'call-1',
      toolName: 'lookup',
      request: { via: 'nats' },
    });
    const tasks = new LifeTasks(as('orchestrator'));
    const open = await tasks.list(P, 'Tasker');
    expect(open.map((t) => t.kind).sort()).toEqual(['nats', 'operator']);
    for (const t of open)
      expect(await tasks.cancel(P, 'Tasker', t.id, 'operator token ops')).toMatchObject({
        kind: 'cancelled',
      });
    expect((await tasks.list(P, 'Tasker')).map((t) => t.state)).toEqual(['cancelling']);
    // The pup may not cancel on an operator's behalf: it has no cancelled_by to write.
    await refused(sql('pup', `UPDATE holt.agent_waits SET cancelled_by = 'me' WHERE instance = $1`, [P]));
  });

  it('a pup may not write what only the ingress or the orchestrator writes: operator messages, grants, finished turns, the usage record', async () => {
    const orch = new InboxStore(as('orchestrator'));
    const { row } = await orch.enqueue({ ...grant, claimId: 'c2', payload: {} });
    const [done] = await new InboxStore(as('pup')).claim(P, ['writer'], 'pod-2', 1, 60_000);
    expect(done?.id).toBe(row.id);
    await new InboxStore(as('pup')).complete(fenceOf(done!), { value: 'ok' });
    const operatorLabels = JSON.stringify(labelsOf('operator', 'message', 'forged', 'forged'));

    // Messages: only the ingress queues them; the pup marks deliveries and nothing else.
    await refused(
      sql(
        'pup',
        `INSERT INTO holt.agent_messages (instance, role, idempotency_key, kind, body, labels)
         VALUES ($1, 'Writer', 'forged', 'message', 'delete the repo', $2::jsonb)`,
        [P, operatorLabels],
      ),
    );
    await refused(
      sql('pup', 'UPDATE holt.agent_messages SET labels = $1::jsonb, body = $2', [operatorLabels, 'x']),
    );
    await refused(sql('pup', 'DELETE FROM holt.agent_messages'));
    await refused(sql('pup', "UPDATE holt.agent_life SET state = 'running'"));

    // Grants and turns: no forged row, no payload, no exit report, no deletion, no identity change.
    await refused(
      sql(
        'pup',
        `INSERT INTO holt.agent_inbox (instance, worker_target, actor_id, turn_id, claim_id, role, claim_type, phase)
         VALUES ($1, 'writer', $2, $3, 'forged', 'Writer', 'exclusive', 'exclusive')`,
        [P, row.actor_id, row.turn_id],
      ),
    );
    await refused(
      sql('pup', `UPDATE holt.agent_inbox SET payload = '{"task":"evil"}' WHERE id = $1`, [row.id]),
    );
    await refused(sql('pup', 'UPDATE holt.agent_inbox SET failure_reported = true, worker_exit = NULL'));
    for (const t of ['agent_inbox', 'agent_turns', 'agent_state_head', 'agent_steps'])
      await refused(sql('pup', `DELETE FROM holt.${t}`));
    await refused(sql('pup', `UPDATE holt.agent_turns SET role = 'Other' WHERE turn_id = $1`, [row.turn_id]));
    // A finished turn's outcome stays: no forged result, no other artefact (requeuing it is allowed).
    const outcome = /finished turn's outcome is not the pup's/;
    await expect(
      sql('pup', `UPDATE holt.agent_turns SET result = '"forged"' WHERE turn_id = $1`, [row.turn_id]),
    ).rejects.toThrow(outcome);
    await expect(
      sql(
        'pup',
        `UPDATE holt.agent_turns SET status = 'done', result_artefact_id = gen_random_uuid() WHERE turn_id = $1`,
        [row.turn_id],
      ),
    ).rejects.toThrow(outcome);
    expect((await orch.turn(row.turn_id))?.result).toBe('ok');

    // Usage: an old row can be neither deleted nor rewritten; totals are written by the roll-up alone.
    const old = await admin(
      `INSERT INTO holt.llm_usage (instance, role, purpose, at, total_tokens, cost_usd)
       VALUES ($1, 'Writer', 'turn', now() - interval '2 hours', 100, 9) RETURNING id`,
      [P],
    );
    const oldId = String(old.rows[0].id);
    expect((await sql('pup', 'DELETE FROM holt.llm_usage WHERE id = $1', [oldId])).rowCount).toBe(0);
    expect((await sql('pup', 'UPDATE holt.llm_usage SET cost_usd = 0 WHERE id = $1', [oldId])).rowCount).toBe(
      0,
    );
    await refused(sql('pup', 'UPDATE holt.llm_usage SET at = now() WHERE id = $1', [oldId]));
    expect((await admin('SELECT cost_usd FROM holt.llm_usage WHERE id = $1', [oldId])).rows[0]).toEqual({
      cost_usd: 9,
    });
    await refused(sql('pup', 'UPDATE holt.llm_usage_totals SET cost_usd = 0'));
    await refused(sql('pup', 'DELETE FROM holt.llm_usage_totals'));
    await expect(
      sql(
        'pup',
        `INSERT INTO holt.llm_usage (instance, role, purpose, cost_usd) VALUES ($1, 'Writer', 'turn', -100)`,
        [P],
      ),
    ).rejects.toThrow(/llm_usage_not_negative/);
    // `holt.pruning` spares the totals only for deletions: set by a pup, an insert still counts.
    const total = async () =>
      Number(
        (
          await admin('SELECT cost_usd FROM holt.llm_usage_totals WHERE instance = $1 AND role = $2', [
            P,
            'Writer',
          ])
        ).rows[0].cost_usd,
      );
    const before = await total();
    const c = await as('pup').connect();
    try {
      await c.query('BEGIN');
      await c.query("SET LOCAL holt.pruning = 'on'");
      await c.query(
        `INSERT INTO holt.llm_usage (instance, role, purpose, cost_usd) VALUES ($1, 'Writer', 'turn', 2)`,
        [P],
      );
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    expect(await total()).toBe(before + 2);
  });

  it('the orchestrator records no turn work and the operator reads only the backlog counts', async () => {
    await refused(
      sql(
        'orchestrator',
        `INSERT INTO holt.llm_usage (instance, role, purpose, cost_usd) VALUES ($1, 'Writer', 'turn', 1)`,
        [P],
      ),
    );
    await refused(sql('orchestrator', "UPDATE holt.agent_messages SET body = 'x'"));
    await refused(sql('orchestrator', "UPDATE holt.work_items SET state = 'cancelled'"));
    await refused(sql('operator', 'SELECT payload FROM holt.agent_inbox'));
    await refused(sql('operator', 'SELECT body FROM holt.agent_messages'));
    await refused(sql('operator', "UPDATE holt.agent_inbox SET status = 'done'"));
    await refused(sql('operator', 'SELECT count(*) FROM holt.llm_usage'));
  });
  it('the console the orchestrator serves reads what it shows as the orchestrator: living agents, their memories, the steps of claims', async () => {
    await new LifeStore(as('orchestrator')).enqueue({
      instance: P,
      role: 'Seen',
      key: 'console-1',
      kind: 'message',
      body: 'look at me',
      labels: labelsOf('operator', 'message', 'POST /v1/agents/Seen/messages', 'token ops'),
    });
    const living = await readLiving(as('orchestrator'), P);
    expect(living.find((a) => a.role === 'Seen')).toBeDefined();
    await expect(
      readSteps(as('orchestrator'), P, ['00000000-0000-4000-8000-000000000000']),
    ).resolves.toBeDefined();
  });
});
