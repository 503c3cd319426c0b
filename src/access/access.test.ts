import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats } from '../../test/harness/nats.ts';
import { startPostgres } from '../../test/harness/postgres.ts';
import { startRedis } from '../../test/harness/redis.ts';
import { readAgentLoad } from '../blackboard/agent-load.ts';
import { Blackboard } from '../blackboard/client.ts';
import { setAgents } from '../blackboard/registry.ts';
import { migrate } from '../inbox/migrate.ts';
import { natsAuthorization, natsUrl } from './nats.ts';
import { ensureRoles, PG_APP, PG_OWNER, pgUrlAs } from './postgres.ts';
import { newPasswords, type Principal } from './principals.ts';
import { redisAclLines, redisUrl } from './redis.ts';

const I = 'acl';
const pw = { redis: newPasswords(), nats: newPasswords() };
const cleanup: (() => Promise<void>)[] = [];
let redisPort = 0;
let natsPort = 0;

beforeAll(async () => {
  const redis = await startRedis({ acl: redisAclLines(I, pw.redis), adminPassword: pw.redis.admin });
  const nats = await startNats({ authorization: natsAuthorization(pw.nats) });
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

  it('a tool service hears tool requests and may answer each once, nothing more; a pup sends them and hears the answers', async () => {
    const pup = await nc('pup');
    const tool = await nc('tool');
    const errors: string[] = [];
    void (async () => {
      for await (const s of tool.status())
        if (s.type === 'error') errors.push(String((s as { error?: unknown }).error));
    })();
    const answers: string[] = [];
    pup.subscribe('evt.tool.acl.Writer.result', {
      callback: (_e, m) => {
        answers.push(m.string());
      },
    });
    tool.subscribe('cmd.tool.lookup', {
      callback: (_e, m) => {
        m.respond('first');
        m.respond('second'); // one answer per request
      },
    });
    tool.subscribe('cmd.agent.*.wakeup'); // not a tool service's to hear
    await Promise.all([pup.flush(), tool.flush()]);
    pup.publish('cmd.tool.lookup', '{}', { reply: 'evt.tool.acl.Writer.result' });
    await pup.flush();
    await new Promise((r) => setTimeout(r, 300));
    tool.publish('evt.tool.acl.Writer.result', 'unasked'); // not an answer to anything it got
    await tool.flush();
    await new Promise((r) => setTimeout(r, 300));
    expect(answers).toEqual(['first']);
    expect(errors.join('\n')).toMatch(/Permissions Violation for Subscription to "cmd.agent.\*.wakeup"/);
    expect(errors.join('\n')).toMatch(/Permissions Violation for Publish to "evt.tool.acl.Writer.result"/);
    await pup.close();
    await tool.close();
    // And no Redis right at all.
    await denied(as('tool').get(`holt:${I}:agents`));
  });
});

describe('Postgres roles', () => {
  it('the runtime role has DML only: no DDL, no COPY PROGRAM, not a superuser', async () => {
    const server = await startPostgres({ database: 'holt' });
    cleanup.push(() => server.stop());
    const pws = { owner: 'owner-password-0123456789', app: 'app-password-0123456789ab' };
    await ensureRoles(server.url, 'holt', pws);
    await migrate(pgUrlAs(server.url, PG_OWNER, pws.owner));
    const app = new pg.Client({ connectionString: pgUrlAs(server.url, PG_APP, pws.app) });
    await app.connect();
    cleanup.push(() => app.end());
    expect((await app.query('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows[0]).toEqual({
      rolsuper: false,
    });
    await app.query('SELECT count(*) FROM holt.agent_inbox');
    await expect(app.query('CREATE TABLE holt.evil (x int)')).rejects.toThrow(/permission denied/);
    await expect(app.query('CREATE TABLE public.evil (x int)')).rejects.toThrow(/permission denied/);
    await expect(app.query('DROP TABLE holt.agent_inbox')).rejects.toThrow(/must be owner/);
    await expect(app.query("COPY holt.agent_inbox TO PROGRAM 'id'")).rejects.toThrow(
      /permission denied|must be superuser|pg_execute_server_program/,
    );
    await expect(app.query('DELETE FROM holt.pgmigrations')).rejects.toThrow(/permission denied/);
  });
});
