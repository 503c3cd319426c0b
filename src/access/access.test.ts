import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats } from '../../test/harness/nats.ts';
import { startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { readAgentLoad } from '../blackboard/agent-load.ts';
import { Blackboard } from '../blackboard/client.ts';
import { setAgents } from '../blackboard/registry.ts';
import { toolOutcomeSubject, toolReplySubject, toolRequestSubject } from '../bus/subjects.ts';
import { newReplyId } from '../bus/tools.ts';
import { natsAuthorization, natsUrl, toolPermissions, toolUserName, toolUsers } from './nats.ts';
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
    // Its MCP servers' status (src/llm/mcp/status.ts): this instance's, and no other's.
    await pup.set(`holt:${I}:mcp_status:Writer`, '{"updated_at_ms":1,"servers":[]}');
    await denied(pup.set(`holt:other:mcp_status:Writer`, '{}'));
    for (const cmd of [['flushall'], ['config', 'get', '*'], ['keys', '*'], ['scan', '0'], ['acl', 'list']])
      await denied(pup.call(cmd[0] as string, ...cmd.slice(1)));
  });

  it('the operator writes the registry, reads the load and status, and never sees the work; the orchestrator owns claims but not the server', async () => {
    const op = new Blackboard(as('operator'), I);
    await setAgents(op, []);
    await as('admin').set(`holt:${I}:agent_load`, '{"updated_at_ms":1,"in_flight":{}}');
    expect(await readAgentLoad(op.redis, op.k.agentLoad)).toEqual({ updated_at_ms: 1, in_flight: {} });
    await op.redis.hgetall(`holt:${I}:agent_status:Writer`);
    expect(await op.redis.get(`holt:${I}:mcp_status:Writer`)).toBe('{"updated_at_ms":1,"servers":[]}');
    // The pup's report is the pup's: the operator reads it, and cannot forge or erase it.
    await denied(op.redis.set(`holt:${I}:mcp_status:Writer`, '{}'));
    await denied(op.redis.del(`holt:${I}:mcp_status:Writer`));
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

  it("outcomes for a nats:<tool> callback: the orchestrator sends them, that tool's user alone hears and answers them, a pup cannot forge one", async () => {
    const orchestrator = await nc('orchestrator');
    const pup = await nc('pup');
    const [deployUser, lookupUser] = toolUsers(pw.nats.tool, TOOLS);
    const user = (u: typeof lookupUser) =>
      connect({ servers: `127.0.0.1:${natsPort}`, user: u!.user, pass: u!.password });
    const lookup = await user(lookupUser);
    const deploy = await user(deployUser);
    const pupErrors = watchErrors(pup);
    const deployErrors = watchErrors(deploy);
    const heard: string[] = [];
    lookup.subscribe(toolOutcomeSubject(I, 'lookup'), {
      callback: (_e, m) => {
        heard.push(m.string());
        m.respond('{"ok":true}');
      },
    });
    deploy.subscribe(toolOutcomeSubject(I, 'lookup')); // another tool's outcomes: refused
    await Promise.all([lookup.flush(), deploy.flush()]);
    const answer = await orchestrator.request(toolOutcomeSubject(I, 'lookup'), '{"state":"completed"}', {
      timeout: 5000,
    });
    expect(answer.string()).toBe('{"ok":true}');
    pup.publish(toolOutcomeSubject(I, 'lookup'), '{"state":"forged"}');
    await pup.flush();
    await eventually(
      'the refusals',
      () =>
        pupErrors
          .join('\n')
          .includes(`Permissions Violation for Publish to "${toolOutcomeSubject(I, 'lookup')}"`) &&
        deployErrors
          .join('\n')
          .includes(`Permissions Violation for Subscription to "${toolOutcomeSubject(I, 'lookup')}"`),
    );
    expect(heard).toEqual(['{"state":"completed"}']);
    for (const c of [orchestrator, pup, lookup, deploy]) await c.close();
  });

  it("a tool's own user hears that tool's requests only, so it cannot answer another tool's call", async () => {
    expect(toolPermissions(I, ['lookup'])).toEqual({
      publish: [],
      subscribe: [toolRequestSubject(I, 'lookup'), toolOutcomeSubject(I, 'lookup')],
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
