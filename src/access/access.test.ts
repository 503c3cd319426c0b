import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats } from '../../test/harness/nats.ts';
import { startPostgres } from '../../test/harness/postgres.ts';
import { startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { readAgentLoad } from '../blackboard/agent-load.ts';
import { Blackboard } from '../blackboard/client.ts';
import { setAgents } from '../blackboard/registry.ts';
import { toolReplySubject, toolRequestSubject } from '../bus/subjects.ts';
import { newReplyId } from '../bus/tools.ts';
import { migrate } from '../inbox/migrate.ts';
import { pruneFinished } from '../inbox/retention.ts';
import { fenceOf } from '../inbox/schema.ts';
import { InboxStore } from '../inbox/store.ts';
import { labelsOf } from '../life/labels.ts';
import { LifeStore } from '../life/store.ts';
import { UsageStore } from '../llm/stores/usage-store.ts';
import { PostgresBacklogReader } from '../operator/autoscale/backlog.ts';
import { natsAuthorization, natsUrl, toolPermissions, toolUserName, toolUsers } from './nats.ts';
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
import { newPasswords, type Principal } from './principals.ts';
import { redisAclLines, redisUrl } from './redis.ts';

const I = 'acl';
/** The instance's asynchronous tools: each gets a NATS user of its own. */
const TOOLS = ['lookup', 'deploy'];
const pw = { redis: newPasswords(), nats: newPasswords() };
const cleanup: (() => Promise<void>)[] = [];
let redisPort = 0;
let natsPort = 0;

beforeAll(async () => {
  const redis = await startRedis({ acl: redisAclLines(I, pw.redis), adminPassword: pw.redis.admin });
  const nats = await startNats({
    authorization: natsAuthorization(pw.nats, { instance: I, tools: toolUsers(pw.nats.tool, TOOLS) }),
  });
  cleanup.push(
    () => redis.stop(),
    () => nats.stop(),
  );
  redisPort = redis.port;
  natsPort = nats.port;
});

afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

const as = (who: Principal) => {
  const r = new Redis(redisUrl(who, pw.redis[who], '127.0.0.1', redisPort), {
    maxRetriesPerRequest: 0,
    lazyConnect: true,
  });
  r.on('error', () => undefined);
  cleanup.push(async () => r.disconnect());
  return r;
};
const denied = async (p: Promise<unknown>) => expect(p).rejects.toThrow(/NOPERM|WRONGPASS|NOAUTH/);

describe('Redis users', () => {
  it('refuses anyone without a user, and a wrong password', async () => {
    const quiet = (url: string) => {
      const r = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => undefined);
      cleanup.push(async () => r.disconnect());
      return r;
    };
    await denied(quiet(`redis://127.0.0.1:${redisPort}`).ping());
    await denied(quiet(redisUrl('pup', 'not-the-password', '127.0.0.1', redisPort)).ping());
    // Redis's `default` user is off: the admin's password with no user name, or as `default`, gets nothing.
    await denied(quiet(`redis://:${pw.redis.admin}@127.0.0.1:${redisPort}`).ping());
    await denied(quiet(`redis://default:${pw.redis.admin}@127.0.0.1:${redisPort}`).ping());
  });

  it('a pup writes artefacts and bids, and may not touch claims, other instances or the server', async () => {
    const pup = as('pup');
    const bb = new Blackboard(pup, I);
    const { created } = await bb.createArtefact({
      id: '7d1c9f5e-1111-4c5a-9b1e-000000000001',
      logical_id: '7d1c9f5e-1111-4c5a-9b1e-000000000002',
      version: 1,
      structural_type: 'Standard',
      type: 'Draft',
      payload: 'x',
      source_artefacts: [],
      produced_by_role: 'Writer',
    });
    expect(created).toBe(true);
    await bb.setBid('c1', 'Writer', 'exclusive');
    expect(await pup.hget(`holt:${I}:claim:c1:bids`, 'Writer')).toBe('exclusive');
    // Reading claims is fine; writing one (a forged grant) is not.
    await pup.hgetall(`holt:${I}:claim:c1`);
    await denied(pup.hset(`holt:${I}:claim:c1`, 'status', 'complete'));
    await denied(pup.sadd(`holt:${I}:index:active_claims`, 'c1'));
    await denied(pup.hset(`holt:${I}:agents`, 'Evil', '{}'));
    await denied(pup.set(`holt:${I}:agent_load`, '{}'));
    await denied(pup.get('holt:other:artefact:x'));
    for (const cmd of [['flushall'], ['config', 'get', '*'], ['keys', '*'], ['scan', '0'], ['acl', 'list']])
      await denied(pup.call(cmd[0] as string, ...cmd.slice(1)));
  });

  it('the operator writes the registry, reads the load and status, and never sees the work; the orchestrator owns claims but not the server', async () => {
    const op = new Blackboard(as('operator'), I);
    await setAgents(op, []);
    await as('admin').set(`holt:${I}:agent_load`, '{"updated_at_ms":1,"in_flight":{}}');
    expect(await readAgentLoad(op.redis, op.k.agentLoad)).toEqual({ updated_at_ms: 1, in_flight: {} });
    await op.redis.hgetall(`holt:${I}:agent_status:Writer`);
    await op.redis.hlen(op.k.quarantine);
    await op.redis.get(op.k.retention);
    await denied(op.redis.hset(op.k.quarantine, 'claim:c1', '{}'));
    await denied(op.redis.set(op.k.retention, '{}'));
    await denied(op.redis.set(`holt:${I}:agent_load`, '{}'));
    await denied(op.redis.hset(`holt:${I}:artefact:x`, 'type', 'Forged'));
    await denied(op.redis.hset(`holt:${I}:claim:c1`, 'status', 'complete'));
    // Payloads, claims, bids and the claim index are the work: the operator reads none of them.
    for (const read of [
      () => op.redis.hgetall(`holt:${I}:artefact:7d1c9f5e-1111-4c5a-9b1e-000000000001`),
      () => op.redis.hgetall(`holt:${I}:claim:c1`),
      () => op.redis.hgetall(`holt:${I}:claim:c1:bids`),
      () => op.redis.smembers(`holt:${I}:index:active_claims`),
      () => op.redis.zrange(`holt:${I}:index:artefacts`, 0, -1),
    ])
      await denied(read());
    const orch = as('orchestrator');
    await orch.hset(`holt:${I}:claim:c1`, 'status', 'pending_review');
    await denied(orch.call('flushall'));
    await denied(orch.call('config', 'set', 'requirepass', 'x'));
    // The admin (the CLI, probes) can do anything.
    expect(await as('admin').call('acl', 'whoami')).toBe('admin');
  });
});

describe('NATS users', () => {
  const nc = (who: Principal) => {
    const u = new URL(natsUrl(who, pw.nats[who], '127.0.0.1', natsPort));
    return connect({
      servers: `127.0.0.1:${natsPort}`,
      user: decodeURIComponent(u.username),
      pass: pw.nats[who],
    });
  };

  it('refuses anonymous clients', async () => {
    await expect(connect({ servers: `127.0.0.1:${natsPort}` })).rejects.toThrow(/Authorization/i);
  });

  it('a pup may ring and answer doorbells but not publish elsewhere; the operator may only listen', async () => {
    const pup = await nc('pup');
    const op = await nc('operator');
    const errors: string[] = [];
    const watch = async (c: Awaited<ReturnType<typeof nc>>) => {
      for await (const s of c.status())
        if (s.type === 'error') errors.push(String((s as { error?: unknown }).error));
    };
    void watch(pup);
    void watch(op);
    const got: string[] = [];
    op.subscribe('cmd.agent.*.wakeup', {
      callback: (_e, m) => {
        got.push(m.subject);
      },
    });
    await op.flush();
    pup.publish('cmd.agent.writer.wakeup', '{}');
    pup.publish('holt.anything.else', 'x');
    op.publish('cmd.agent.writer.wakeup', '{}');
    await pup.flush();
    await op.flush();
    await new Promise((r) => setTimeout(r, 300));
    expect(got).toEqual(['cmd.agent.writer.wakeup']);
    expect(errors.join('\n')).toMatch(/Permissions Violation for Publish to "holt.anything.else"/);
    expect(errors.join('\n')).toMatch(/Permissions Violation for Publish to "cmd.agent.writer.wakeup"/);
    await pup.close();
    await op.close();
  });

  it("a tool service hears its instance's tool requests and may answer each once, nothing more; a pup sends them and hears the answers", async () => {
    const pup = await nc('pup');
    const tool = await nc('tool');
    const errors = watchErrors(tool);
    const answers: string[] = [];
    pup.subscribe(`evt.tool.${I}.Writer.*.*`, {
      callback: (_e, m) => {
        answers.push(m.string());
      },
    });
    tool.subscribe(toolRequestSubject(I, 'lookup'), {
      callback: (_e, m) => {
        m.respond('first');
        m.respond('second'); // one answer per request
      },
    });
    tool.subscribe('cmd.agent.*.wakeup'); // not a tool service's to hear
    tool.subscribe('cmd.tool.other.lookup'); // another instance's tools
    await Promise.all([pup.flush(), tool.flush()]);
    const reply = toolReplySubject(I, 'Writer', 'lookup', newReplyId());
    pup.publish(toolRequestSubject(I, 'lookup'), '{}', { reply });
    await eventually('the answer', () => answers.length === 1);
    tool.publish(reply, 'unasked'); // not an answer to anything it got
    await tool.flush();
    // A second request: its answer comes after whatever the service sent before, had it passed.
    pup.publish(toolRequestSubject(I, 'lookup'), '{}', {
      reply: toolReplySubject(I, 'Writer', 'lookup', newReplyId()),
    });
    await eventually('the second answer', () => answers.length >= 2);
    expect(answers).toEqual(['first', 'first']);
    const said = () => errors.join('\n');
    await eventually('the refusals', () =>
      [
        /Permissions Violation for Subscription to "cmd.agent.\*.wakeup"/,
        /Permissions Violation for Subscription to "cmd.tool.other.lookup"/,
        new RegExp(`Permissions Violation for Publish to "${reply.replace(/\./g, '\\.')}"`),
      ].every((r) => r.test(said())),
    );
    await pup.close();
    await tool.close();
    // And no Redis right at all.
    await denied(as('tool').get(`holt:${I}:agents`));
  });

  it("a tool's own user hears that tool's requests only, so it cannot answer another tool's call", async () => {
    expect(toolPermissions(I, ['lookup'])).toEqual({
      publish: [],
      subscribe: [toolRequestSubject(I, 'lookup')],
      responses: true,
    });
    expect(() => toolPermissions(I, ['a.b'])).toThrow(/invalid tool name/);
    const [deployUser, lookupUser] = toolUsers(pw.nats.tool, TOOLS);
    expect([deployUser!.user, lookupUser!.user]).toEqual([toolUserName('deploy'), toolUserName('lookup')]);
    // Derived, distinct, and not the shared tool password.
    expect(new Set([deployUser!.password, lookupUser!.password, pw.nats.tool]).size).toBe(3);
    const pup = await nc('pup');
    const lookup = await connect({
      servers: `127.0.0.1:${natsPort}`,
      user: lookupUser!.user,
      pass: lookupUser!.password,
    });
    const errors = watchErrors(lookup);
    const heard: string[] = [];
    const answers: string[] = [];
    pup.subscribe(`evt.tool.${I}.Writer.*.*`, {
      callback: (_e, m) => {
        if (m.headers?.code === 503) return; // nats-server's "no responders" for the deploy request
        answers.push(`${m.subject.split('.')[4]}: ${m.string()}`);
      },
    });
    lookup.subscribe(toolRequestSubject(I, 'lookup'), {
      callback: (_e, m) => {
        heard.push(m.subject);
        m.respond('lookup answer');
      },
    });
    lookup.subscribe(toolRequestSubject(I, 'deploy')); // another tool's requests: refused
    lookup.subscribe('cmd.tool.>'); // all of them: refused
    await Promise.all([pup.flush(), lookup.flush()]);
    const deployReply = toolReplySubject(I, 'Writer', 'deploy', newReplyId());
    pup.publish(toolRequestSubject(I, 'deploy'), '{}', { reply: deployReply });
    lookup.publish(deployReply, 'forged deploy answer'); // a reply subject it was never given
    await lookup.flush();
    pup.publish(toolRequestSubject(I, 'lookup'), '{}', {
      reply: toolReplySubject(I, 'Writer', 'lookup', newReplyId()),
    });
    await eventually('the lookup answer', () => answers.length >= 1);
    expect(heard).toEqual([toolRequestSubject(I, 'lookup')]);
    expect(answers).toEqual(['lookup: lookup answer']);
    await eventually('the refusals', () =>
      [
        `Permissions Violation for Subscription to "${toolRequestSubject(I, 'deploy')}"`,
        'Permissions Violation for Subscription to "cmd.tool.>"',
        `Permissions Violation for Publish to "${deployReply}"`,
      ].every((e) => errors.join('\n').includes(e)),
    );
    // A wrong password for a tool's user is refused.
    await expect(
      connect({ servers: `127.0.0.1:${natsPort}`, user: lookupUser!.user, pass: deployUser!.password }),
    ).rejects.toThrow(/Authorization/i);
    await pup.close();
    await lookup.close();
  });
});

/** The errors a NATS connection is told (permission violations come back this way). */
function watchErrors(c: Awaited<ReturnType<typeof connect>>): string[] {
  const errors: string[] = [];
  void (async () => {
    for await (const s of c.status())
      if (s.type === 'error') errors.push(String((s as { error?: unknown }).error));
  })();
  return errors;
}

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
    expect(await pup.complete(f, { value: 'ok' })).toBe(true);
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
    expect(await life.finish(step.fence!, { status: 'done' })).toBe(true);

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

  it('a pup may not write what only the ingress or the orchestrator writes: operator messages, grants, finished turns, the usage record', async () => {
    const orch = new InboxStore(as('orchestrator'));
    const { row } = await orch.enqueue({ ...grant, claimId: 'c2', payload: {} });
    const [done] = await new InboxStore(as('pup')).claim(P, ['writer'], 'pod-2', 1, 60_000);
    expect(done?.id).toBe(row.id);
    expect(await new InboxStore(as('pup')).complete(fenceOf(done!), { value: 'ok' })).toBe(true);
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
});
