import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/access/tokens.ts';
import { HoltFileError, parseHoltFile } from '../../src/api/holtfile.ts';
import { Blackboard } from '../../src/blackboard/client.ts';
import { artefactToHash, claimToHash, hashToArtefact, hashToClaim } from '../../src/blackboard/codec.ts';
import { readQuarantine } from '../../src/blackboard/quarantine.ts';
import { connectBus } from '../../src/bus/connect.ts';
import { type Doorbell, subscribeDoorbell } from '../../src/bus/doorbell.ts';
import { doorbellSubject } from '../../src/bus/subjects.ts';
import { silentLogger } from '../../src/common/logger.ts';
import { createPool } from '../../src/common/pg.ts';
import { InboxStore } from '../../src/inbox/store.ts';
import { startIngressServer } from '../../src/ingress/server.ts';
import { LifeStore } from '../../src/life/store.ts';
import { LifeTasks } from '../../src/life/tasks.ts';
import { parseAgent, parseHolt } from '../../src/operator/controllers/resources.ts';
import { InboxDispatcher } from '../../src/orchestrator/inbox-dispatcher.ts';
import {
  claimFor,
  newGoal,
  register,
  ScriptedAgent,
  startOrchestrator,
  waitClaim,
} from '../../src/orchestrator/testkit.ts';
import { parseToolStdout } from '../../src/pup/result.ts';
import { claim as newClaim } from '../../src/pup/testkit.ts';
import { migrate } from '../../src/state/migrate.ts';
import { type NatsServer, startNats } from '../harness/nats.ts';
import { type PostgresServer, startPostgres } from '../harness/postgres.ts';
import { type RedisServer, startRedis } from '../harness/redis.ts';
import { eventually } from '../harness/wait.ts';

// The malformed-input corpus: generated inputs (fast-check, fixed seeds so a failure replays) of every
// kind a Holt reads from outside or from its stores. Each gives its clear error or its quarantine:
// never a crash, a hang or a hot loop. Counts are summed and printed; together well over 500.

const SEED = 20261125;
let redis: RedisServer;
let pgs: PostgresServer;
let nats: NatsServer;
const counted: Record<string, number> = {};
const count = (kind: string, n: number) => {
  counted[kind] = (counted[kind] ?? 0) + n;
};

beforeAll(async () => {
  [redis, pgs, nats] = await Promise.all([startRedis(), startPostgres(), startNats()]);
});
afterAll(async () => {
  const total = Object.values(counted).reduce((a, b) => a + b, 0);
  console.log(`malformed-input corpus: ${total} inputs ${JSON.stringify(counted)}`);
  await Promise.all([redis?.stop(), pgs?.stop(), nats?.stop()]);
});

/** A stored hash: some of the real fields (the codec's own, artefacts' and claims'), each with a value
 * that may or may not fit it. */
const sample = newGoal('x');
const FIELDS = [
  ...new Set([
    ...Object.keys(artefactToHash(sample)),
    ...Object.keys(
      claimToHash({
        ...newClaim(sample.id),
        expected_bidders: ['a'],
        created_at_ms: 1,
        dormant_reason: 'x',
      }),
    ),
    'rev',
  ]),
];
const value = fc.oneof(
  fc.string(),
  fc.constantFrom('[', 'null', '{}', '[1,2]', '-1', '1.5', 'Standard', 'pending_review', '{"current":1}'),
  fc.integer().map(String),
  fc.json(),
  fc.uuid().map((u) => JSON.stringify([u])),
);
const hash = fc.dictionary(fc.constantFrom(...FIELDS), value, { minKeys: 1, maxKeys: 10 });
const parses = (f: () => unknown) => {
  try {
    f();
    return true;
  } catch {
    return false;
  }
};

describe('stored items the orchestrator reads (real Redis, a real orchestrator)', () => {
  it('malformed claims, artefacts, children, bids and events: each quarantined once; the leader starts and a real workflow completes', async () => {
    const instance = `corpus${randomUUID().slice(0, 6)}`;
    const bb = Blackboard.connect(redis.url, instance);
    await register(bb, ['Coder']);
    const k = bb.k;
    const claims = fc.sample(hash, { numRuns: 150, seed: SEED });
    const artefacts = fc.sample(hash, { numRuns: 150, seed: SEED + 1 });
    const children = fc.sample(hash, { numRuns: 50, seed: SEED + 2 });
    const bids = fc.sample(fc.dictionary(fc.string(), fc.string(), { minKeys: 1 }), {
      numRuns: 50,
      seed: SEED + 3,
    });
    const expected = new Set<string>();
    for (const h of claims) {
      const id = randomUUID();
      await bb.redis.hset(k.claim(id), h);
      await bb.redis.sadd(k.activeClaims, id);
      if (!parses(() => hashToClaim(id, h))) expected.add(`claim:${id}`);
    }
    for (const h of artefacts) {
      const id = randomUUID();
      await bb.redis.hset(k.artefact(id), h);
      await bb.redis.zadd(k.artefactIndex, Date.now(), id);
      if (!parses(() => hashToArtefact(id, h))) expected.add(`artefact:${id}`);
    }
    // A goal with unreadable children, and claims whose bids are anything at all.
    const g = newGoal('with bad children');
    await bb.createArtefact(g);
    for (const h of children) {
      const id = randomUUID();
      await bb.redis.hset(k.artefact(id), { ...h, id });
      await bb.redis.sadd(k.children(g.id), id);
      if (!parses(() => hashToArtefact(id, { ...h, id }))) expected.add(`artefact:${id}`);
    }
    const bidGoals = [];
    for (const b of bids) {
      const goal = newGoal('bid on me');
      await bb.createArtefact(goal);
      bidGoals.push({ goal, b });
    }
    const coder = await ScriptedAgent.start(redis.url, instance, {
      role: 'Coder',
      bid: (t) => (t.payload === 'with bad children' || t.payload === 'the good one' ? 'exclusive' : null),
      respond: () => ({ structural_type: 'Terminal', type: 'Done' }),
    });
    const o = startOrchestrator(redis.url, instance, { bidTimeoutMs: 3_600_000 });
    try {
      await o.whenLeader(); // recovery and the first full pass went through all of it
      for (const { goal, b } of bidGoals) {
        const c = await claimFor(bb, goal.id);
        await bb.redis.hset(k.bids(c.id), b);
      }
      // Events no schema accepts, on the channels the leader listens to.
      const events = fc.sample(fc.oneof(fc.string(), fc.json()), { numRuns: 50, seed: SEED + 4 });
      for (const [i, e] of events.entries())
        await bb.redis.publish(i % 2 ? k.channels.artefactEvents : k.channels.workflowEvents, e);
      await waitClaim(
        bb,
        (await claimFor(bb, g.id)).id,
        (c) => c.status === 'complete',
        'the goal with bad children',
      );
      const good = newGoal('the good one');
      await bb.createArtefact(good);
      await waitClaim(
        bb,
        (await claimFor(bb, good.id)).id,
        (c) => c.status === 'complete',
        'a good workflow',
      );
      let missing: string[] = [];
      const got = await eventually('every malformed item quarantined', async () => {
        const q = new Set((await readQuarantine(bb)).map((x) => `${x.kind}:${x.id}`));
        missing = [...expected].filter((e) => !q.has(e));
        return missing.length ? null : q;
      }).catch((e: unknown) => {
        throw new Error(
          `${(e as Error).message}; not quarantined: ${missing.slice(0, 5).join(', ')} (${missing.length})`,
        );
      });
      expect([...got].filter((x) => !expected.has(x))).toEqual([]);
      await o.quarantine.settled();
      const reported = (await o.metrics.quarantined.get()).values.reduce((n, v) => n + v.value, 0);
      expect(reported).toBe(expected.size); // each reported once
      expect(o.isLeader()).toBe(true);
      const active = new Set(await bb.activeClaimIds());
      expect([...expected].filter((e) => e.startsWith('claim:') && active.has(e.slice(6)))).toEqual([]);
      count('claim hashes', claims.length);
      count('artefact hashes', artefacts.length);
      count('children', children.length);
      count('bids', bids.length);
      count('events', events.length);
    } finally {
      await o.stop();
      await coder.stop();
      await bb.close();
    }
  });
});

describe('inbox rows and doorbells (real Postgres, real NATS)', () => {
  it('rows whose fields hold anything: each fails with a clear error or runs; a claim never throws', async () => {
    await migrate(pgs.url);
    const store = InboxStore.connect(pgs.url);
    const d = new InboxDispatcher({
      store,
      instance: 'corpus',
      targetOf: () => 'corpus',
      ring: () => undefined,
    });
    const mutations = fc.sample(
      fc.record({
        claim_type: fc.oneof(fc.string(), fc.constantFrom('claim', 'review', 'exclusive')),
        phase: fc.oneof(fc.string(), fc.constantFrom('parallel', 'review', 'exclusive')),
        role: fc.string(),
        payload: fc.jsonValue(),
      }),
      { numRuns: 60, seed: SEED + 5 },
    );
    try {
      for (const m of mutations) {
        const claim = {
          id: randomUUID(),
          artefact_id: randomUUID(),
          status: 'pending_parallel' as const,
          granted_review_agents: [],
          granted_parallel_agents: ['Worker'],
          granted_exclusive_agent: '',
        };
        await d.dispatch({ claim, role: 'Worker', claimType: 'claim', phase: 'parallel' });
        await store.pool.query(
          'UPDATE holt.agent_inbox SET claim_type = $2, phase = $3, role = $4, payload = $5::jsonb WHERE claim_id = $1',
          [claim.id, m.claim_type, m.phase, m.role, JSON.stringify(m.payload ?? null)],
        );
      }
      const got = [];
      for (;;) {
        const batch = await store.claim('corpus', ['corpus'], 'corpus-worker', 25, 60_000);
        got.push(...batch);
        const left = await store.pool.query(
          `SELECT count(*)::int AS n FROM holt.agent_inbox WHERE instance = 'corpus' AND status = 'pending'`,
        );
        if (!left.rows[0].n) break;
      }
      const rows = await store.pool.query(
        `SELECT status, last_error FROM holt.agent_inbox WHERE instance = 'corpus'`,
      );
      for (const r of rows.rows) {
        expect(['claimed', 'failed']).toContain(r.status);
        if (r.status === 'failed') expect(r.last_error).toMatch(/^bad inbox row: /);
      }
      expect(rows.rows.filter((r) => r.status === 'claimed')).toHaveLength(got.length);
      count('inbox rows', mutations.length);
    } finally {
      await store.close();
    }
  });

  it('doorbells of any bytes are ignored; the next real bell still rings', async () => {
    const nc: NatsConnection = await connectBus(nats.url, 'corpus');
    const heard: Doorbell[] = [];
    const sub = subscribeDoorbell(nc, 'corpus', 'corpus', (b) => heard.push(b), silentLogger());
    try {
      const junk = fc.sample(fc.oneof(fc.string(), fc.json(), fc.uint8Array()), {
        numRuns: 60,
        seed: SEED + 6,
      });
      for (const j of junk) nc.publish(doorbellSubject('corpus'), j);
      const bell: Doorbell = { instance: 'corpus', target: 'corpus', reason: 'manual', at_ms: 1 };
      nc.publish(doorbellSubject('corpus'), JSON.stringify(bell));
      await eventually('the real bell', () => heard.some((b) => b.reason === 'manual'));
      expect(heard.every((b) => b.instance === 'corpus' && b.target === 'corpus')).toBe(true);
      count('doorbells', junk.length);
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
  });
});

describe("the living agents' ingress (real HTTP, real Postgres)", () => {
  it('paths, headers and bodies of any bytes: a 2xx or a 4xx with its reason, never a 5xx "retry"; the server keeps serving', async () => {
    await migrate(pgs.url);
    const token = 'holt_corpus-token';
    const pool = createPool(pgs.url, { max: 2 });
    const srv = await startIngressServer({
      instance: 'corpus-ingress',
      port: 0,
      host: '127.0.0.1',
      life: new LifeStore(pool),
      tasks: new LifeTasks(pool),
      tokens: () => [
        {
          name: 'corpus',
          role: 'Writer',
          sha256: hashToken(token),
          modes: ['enqueue_message', 'wake_hint'],
          origin: 'webhook',
          ratePerMinute: 100_000,
          maxPriority: 0,
          callbacks: [],
          createdAtMs: 0,
        },
      ],
      knows: async (role) => role === 'Writer',
      ring: () => undefined,
      log: silentLogger(),
      limits: { maxAuthFailures: 100_000 },
    });
    // The review's attacks first, then generated ones.
    const attacks: [string, Uint8Array][] = [
      ['/v1/agents/Wr%zzter/messages', Buffer.from('{"text":"x"}')],
      ['/v1/agents/Writer%00/messages', Buffer.from('{"text":"x"}')],
      ['/v1/agents/Writer/messages', Buffer.from(`{"data":${'['.repeat(30_000)}${']'.repeat(30_000)}}`)],
      ['/v1/agents/Writer/messages', Buffer.from('{"text":"a\\u0000b"}')],
      ['/v1/agents/Writer/messages', Buffer.from([...Buffer.from('{"text":"a'), 0, ...Buffer.from('b"}')])],
      ['/v1/agents/Writer/messages', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d])],
      ['/v1/agents/Writer/wake', Buffer.from('{"text":"\\ud800"}')],
    ];
    const generated = fc.sample(
      fc.tuple(
        fc.oneof(
          fc.constantFrom('/v1/agents/Writer/messages', '/v1/agents/Writer/wake'),
          fc.string({ maxLength: 40 }).map((r) => `/v1/agents/${encodeURIComponent(r)}/messages`),
          fc.string({ maxLength: 40 }).map((r) => `/v1/agents/${r.replace(/[\s?#]/g, '%')}/messages`),
        ),
        fc.oneof(
          fc.uint8Array({ maxLength: 300 }),
          fc.json({ maxDepth: 40 }).map((j) => Buffer.from(j)),
          fc.string().map((t) => Buffer.from(JSON.stringify({ text: t }))),
        ),
      ),
      { numRuns: 300, seed: SEED },
    );
    const statuses = new Map<number, number>();
    try {
      for (const [path, body] of [...attacks, ...generated]) {
        const r = await fetch(`http://127.0.0.1:${srv.port}${path}`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'idempotency-key': `c-${statuses.size}-${Math.random().toString(36).slice(2)}`,
            'content-type': 'application/json',
          },
          body,
        });
        const reply = (await r.json()) as { error?: string };
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        expect({ path, status: r.status < 500 }).toEqual({ path, status: true });
        if (r.status >= 400) expect(reply.error).toBeTruthy();
      }
      count('ingress requests', attacks.length + generated.length);
      expect([...statuses.keys()].some((s) => s === 202)).toBe(true);
      expect([...statuses.keys()].some((s) => s === 400)).toBe(true);
    } finally {
      await srv.close();
      await pool.end();
    }
  });
});

describe('inputs from users and tools (pure parsers)', () => {
  it('tool stdout: ok, or a reason to put in the Failure; never a throw', () => {
    let n = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc.jsonValue().map((v) => JSON.stringify(v)),
        ),
        (out) => {
          n++;
          const r = parseToolStdout(out);
          if (!r.ok) expect(r.reason.length).toBeGreaterThan(0);
        },
      ),
      { numRuns: 100, seed: SEED + 7 },
    );
    count('tool stdout', n);
  });

  it('holt.yml: a file or a HoltFileError naming each problem; never another error', () => {
    let n = 0;
    const yamlish = fc.oneof(
      fc.string(),
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc
        .record({ version: fc.oneof(fc.string(), fc.constant('1.0')), agents: fc.jsonValue() })
        .map((v) => JSON.stringify(v)),
    );
    fc.assert(
      fc.property(yamlish, (text) => {
        n++;
        try {
          parseHoltFile(text);
        } catch (e) {
          expect(e).toBeInstanceOf(HoltFileError);
          expect((e as Error).message.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 100, seed: SEED + 8 },
    );
    count('holt.yml', n);
  });

  it('custom resources: a spec or an error message; never a throw', () => {
    let n = 0;
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('Holt', 'Agent'), (spec, kind) => {
        n++;
        const o = {
          apiVersion: 'holt.io/v1alpha1',
          kind,
          metadata: { name: 'x', namespace: 'y' },
          spec,
        } as never;
        const r = kind === 'Holt' ? parseHolt(o) : parseAgent(o);
        if (!r.ok) expect(r.error.length).toBeGreaterThan(0);
      }),
      { numRuns: 60, seed: SEED + 9 },
    );
    count('custom resources', n);
  });
});
