import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { type Monitored, monitorCommands } from '../../test/harness/redis-monitor.ts';
import { readAgentLoad } from '../blackboard/agent-load.ts';
import { claimIdsForArtefacts, indexArtefacts } from '../blackboard/claim-engine.ts';
import { Blackboard } from '../blackboard/client.ts';
import { artefactToHash } from '../blackboard/codec.ts';
import { lockHolder } from '../blackboard/instance-lease.ts';
import { hasBids } from '../blackboard/pup-reads.ts';
import { readQuarantine } from '../blackboard/quarantine.ts';
import { setAgents } from '../blackboard/registry.ts';
import { claimSnapshotScript, updateClaimsScript } from '../blackboard/scripts.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { silentLogger } from '../common/logger.ts';
import type { OrchestratorConfig } from './config.ts';
import { type Grant, type GrantDispatcher, HoltDispatcher } from './dispatch.ts';
import { LeaderTerm } from './leader-term.ts';
import { OrchestratorMetrics } from './metrics.ts';
import type { Orchestrator, OrchestratorOptions } from './orchestrator.ts';
import { Quarantine } from './quarantine.ts';
import {
  type AgentScript,
  claimFor,
  newGoal,
  recordChannels,
  register,
  ScriptedAgent,
  startOrchestrator,
  testConfig,
  waitClaim,
  waitFor,
} from './testkit.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const isGoal = (a: Artefact) => a.type === 'GoalDefined';
const onGoal = (bid: string) => (a: Artefact) => (isGoal(a) ? bid : 'ignore');

/** Review → parallel → exclusive on the goal; every output is Terminal-free Standard except the last. */
const threePhase: AgentScript[] = [
  { role: 'Reviewer', bid: onGoal('review'), respond: () => ({ type: 'Review', payload: '{}' }) },
  { role: 'Par', bid: onGoal('claim'), respond: () => ({ type: 'Part', payload: 'p' }) },
  { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code', payload: 'c' }) },
];

async function setup(scripts: AgentScript[], extraRoles: string[] = []) {
  const instance = `r${randomUUID().slice(0, 8)}`;
  const bb = Blackboard.connect(redis.url, instance);
  await register(bb, [...scripts.map((s) => s.role), ...extraRoles]);
  const rec = await recordChannels(redis.url, instance);
  const agents: ScriptedAgent[] = [];
  for (const s of scripts) agents.push(await ScriptedAgent.start(redis.url, instance, s));
  const orchs: Orchestrator[] = [];
  cleanups.push(async () => {
    for (const o of orchs) await o.stop().catch(() => undefined);
    for (const a of agents) await a.stop();
    rec.close();
    await bb.close();
  });
  const start = (over: Partial<OrchestratorConfig> = {}, opts: Omit<OrchestratorOptions, 'config'> = {}) => {
    const o = startOrchestrator(redis.url, instance, over, opts);
    orchs.push(o);
    return o;
  };
  return { instance, bb, rec, agents, start };
}

/** Each (claim, role) got at most one claim_granted, and no claim's recorded grant ever changed. */
function assertNoDuplicateGrant(rec: Awaited<ReturnType<typeof recordChannels>>): void {
  const seen = new Map<string, number>();
  for (const d of rec.events('claim_granted')) {
    const k = `${d.claim_id}/${d.agent_name}`;
    seen.set(k, (seen.get(k) ?? 0) + 1);
  }
  expect([...seen.values()].filter((n) => n > 1)).toEqual([]);
  const exclusive = new Map<string, string>();
  for (const m of rec.messages.filter((x) => x.channel === 'claim_updates')) {
    const c = m.msg as Claim;
    if (!c.granted_exclusive_agent) continue;
    expect(exclusive.get(c.id) ?? c.granted_exclusive_agent).toBe(c.granted_exclusive_agent);
    exclusive.set(c.id, c.granted_exclusive_agent);
  }
}

describe('orchestrator resilience', () => {
  it('100 claims in flight with one agent that never bids: no claim blocks another', async () => {
    const { bb, start } = await setup([
      {
        role: 'Coder',
        bid: onGoal('exclusive'),
        respond: () => ({ structural_type: 'Terminal', type: 'Done' }),
      },
      { role: 'Silent', bid: () => null },
    ]);
    // The bid timeout never fires within the test: only a bid can release a claim.
    const orch = start({ bidTimeoutMs: 3_600_000 });
    await orch.whenLeader();
    const goals = Array.from({ length: 100 }, (_, i) => newGoal(`g${i}`));
    await Promise.all(goals.map((g) => bb.createArtefact(g)));
    const ids = await waitFor(async () => {
      const found = await claimIdsForArtefacts(
        bb,
        goals.map((g) => g.id),
      );
      if (found.some((id) => !id)) return null;
      const coder = await hasBids(bb, found as string[], 'Coder');
      return coder.every(Boolean) ? (found as string[]) : null;
    }, 'all 100 claims with the Coder bid');
    // Only the last claim gets its missing bid: it completes while the 99 before it still wait.
    // A serial engine (Holt's) would be stuck on the first claim and never reach the last.
    const last = ids[99] as string;
    await bb.setBid(last, 'Silent', 'ignore');
    await waitClaim(bb, last, (c) => c.status === 'complete', 'the last claim completes');
    const others = await bb.getClaims(ids.slice(0, 99));
    expect(others.map((c) => c?.claim.status)).toEqual(Array(99).fill('pending_review'));
    expect(others.every((c) => c?.claim.phase_state === undefined)).toBe(true);
  });

  it('a bid whose event was missed while the event connection was down is acted on once it is back', async () => {
    const { bb, start } = await setup([
      {
        role: 'Coder',
        bid: onGoal('exclusive'),
        respond: () => ({ structural_type: 'Terminal', type: 'Done' }),
      },
      { role: 'Silent', bid: () => null },
    ]);
    // Neither the bid poll nor the bid timeout fires within the test.
    const orch = start({ bidPollMs: 3_600_000, bidTimeoutMs: 3_600_000 });
    await orch.whenLeader();
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await claimFor(bb, g.id);
    await waitFor(async () => (await hasBids(bb, [c.id], 'Coder'))[0], 'the Coder bid');
    // The last bid lands with no event (as if published while the connection was down), then the
    // orchestrator's event connection drops and comes back.
    await bb.redis.hset(bb.k.bids(c.id), 'Silent', 'ignore');
    await bb.redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    // Granted, not necessarily complete: the agents' own subscriptions were cut too, so the grant
    // announcement may reach nobody (that is the re-announcement's job, tested elsewhere).
    await waitClaim(
      bb,
      c.id,
      (x) => x.granted_exclusive_agent === 'Coder',
      'the grant after the resubscribe',
    );
  });

  it('a claim creation that fails once (no leader change) is retried by the reconcile loop', async () => {
    const { bb, start } = await setup([], ['Silent']);
    let attempts = 0;
    const o = start(
      {},
      {
        onStep: (name) => {
          if (name === 'before_create_claim' && attempts++ === 0)
            throw new Error('injected: transient Redis error');
        },
      },
    );
    await o.whenLeader();
    // Stored but not yet indexed: only the live event can reach it, and its claim creation fails.
    const g = newGoal();
    await bb.redis.hset(bb.k.artefact(g.id), artefactToHash(g));
    await bb.redis.publish(bb.k.channels.artefactEvents, JSON.stringify(g));
    await waitFor(() => attempts > 0, 'the failed claim creation');
    // Now indexed (no second event): the reconcile loop must still create the claim.
    await indexArtefacts(bb, [g]);
    await claimFor(bb, g.id);
    expect(attempts).toBe(2);
    expect(o.isLeader()).toBe(true);
  });

  it("the reconcile look-back runs on the orchestrator's clock, not on writers' created_at_ms", async () => {
    const { bb, start } = await setup([], ['Silent']);
    const o = start();
    await o.whenLeader();
    const ahead = newGoal('from a skewed clock', { created_at_ms: Date.now() + 86_400_000 });
    await bb.createArtefact(ahead);
    await claimFor(bb, ahead.id);
    // Stored and indexed, but its event was lost: only the reconcile loop can find it.
    const lost = newGoal('event lost');
    await bb.redis.hset(bb.k.artefact(lost.id), artefactToHash(lost));
    await indexArtefacts(bb, [lost]);
    await claimFor(bb, lost.id);
  });

  it('a grant whose dispatch failed is dispatched again', async () => {
    const { bb, rec, agents, start } = await setup([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
    ]);
    const holt = new HoltDispatcher(bb);
    let calls = 0;
    const flaky: GrantDispatcher = {
      async dispatch(g) {
        if (calls++ === 0) throw new Error('injected: dispatch failed');
        await holt.dispatch(g);
      },
    };
    const o = start({ redispatchAfterMs: 300 }, { dispatcher: flaky });
    await o.whenLeader();
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    expect(c.granted_exclusive_agent).toBe('Coder');
    expect(agents[0]?.grants.map((n) => n.claim_id)).toEqual([c.id]);
    expect(calls).toBe(2);
    assertNoDuplicateGrant(rec);
  });

  it('an artefact written the Holt way (HSET + PUBLISH, no index) while the orchestrator is down gets a claim', async () => {
    const { bb, start } = await setup([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
    ]);
    // Older than the look-back, and its event went to nobody.
    const g = newGoal('from holt forage', { created_at_ms: Date.now() - 3_600_000 });
    await bb.redis.hset(bb.k.artefact(g.id), artefactToHash(g));
    await bb.redis.publish(bb.k.channels.artefactEvents, JSON.stringify(g));
    const o = start();
    await o.whenLeader();
    expect(await bb.listArtefactIds()).toContain(g.id);
    await waitClaim(bb, (await claimFor(bb, g.id)).id, (c) => c.status === 'complete');
  });

  it('a term halted while it subscribes closes its subscription', async () => {
    const instance = `r${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    cleanups.push(() => bb.close());
    const term = new LeaderTerm({
      bb,
      config: testConfig(redis.url, instance),
      log: silentLogger(),
      metrics: new OrchestratorMetrics(),
      dispatcher: new HoltDispatcher(bb),
      registry: new Map(),
      quarantine: new Quarantine({
        bb: () => bb,
        log: silentLogger(),
        metrics: new OrchestratorMetrics(),
        alive: () => true,
      }),
      leaseValid: () => true,
    });
    const started = term.start();
    term.halt(); // the lease is lost before the subscription exists
    await expect(started).rejects.toThrow(/lease/);
    const subscribers = async () =>
      ((await bb.redis.pubsub('NUMSUB', bb.k.channels.artefactEvents)) as [string, number])[1];
    await waitFor(async () => (await subscribers()) === 0, 'the subscription to close');
  });

  it('docs/protocol.md row 36: single-orchestrator lock/heartbeat — one works, one waits, the standby takes over', async () => {
    const { bb, rec, start } = await setup([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code', payload: 'c' }) },
    ]);
    const a = start({ leaseTtlMs: 400 }, { holder: 'first' });
    const b = start({ leaseTtlMs: 400 }, { holder: 'second' });
    await Promise.race([a.whenLeader(), b.whenLeader()]);
    const [leader, standby] = a.isLeader() ? [a, b] : [b, a];
    expect(standby.isLeader()).toBe(false);
    expect(await lockHolder(bb)).toBe(leader.holder);
    expect(await bb.redis.get(bb.k.lock)).toMatch(/^orchestrator:\d+$/);

    const g1 = newGoal();
    await bb.createArtefact(g1);
    await waitClaim(bb, (await claimFor(bb, g1.id)).id, (c) => c.status === 'complete');
    expect(standby.isLeader()).toBe(false);

    leader.halt(); // dies without releasing: the standby must wait for the lease to expire
    await standby.whenLeader();
    expect(await lockHolder(bb)).toBe(standby.holder);
    const g2 = newGoal();
    await bb.createArtefact(g2);
    await waitClaim(bb, (await claimFor(bb, g2.id)).id, (c) => c.status === 'complete');
    assertNoDuplicateGrant(rec);
  });

  it('losing the lease stops work immediately', async () => {
    const { bb, rec, start } = await setup([], ['Silent']);
    const a = start({ leaseTtlMs: 300 }, { holder: 'a' });
    await a.whenLeader();
    // Someone else takes the lease (an operator's fencing, or a clock jump): `a` must stand down.
    await bb.redis.set(`${bb.k.lock}:holder`, 'intruder', 'PX', 60_000);
    await bb.redis.set(bb.k.lock, 'orchestrator:1', 'PX', 60_000);
    await waitFor(() => !a.isLeader(), 'a to stand down');
    // Its subscription is gone: nobody but the recorder hears of new artefacts.
    const numsub = async () =>
      ((await bb.redis.pubsub('NUMSUB', bb.k.channels.artefactEvents)) as [string, number])[1];
    await waitFor(async () => (await numsub()) === 0, 'the old term to unsubscribe');
    const g = newGoal();
    await bb.createArtefact(g);
    await waitFor(
      () => rec.messages.some((m) => m.channel === 'artefact_events' && (m.msg as Artefact).id === g.id),
      'the artefact event to be delivered',
    );
    const returned = Date.now();
    await bb.redis.del(`${bb.k.lock}:holder`, bb.k.lock);
    await a.whenLeader();
    // The new term's reconcile finds the artefact the old one missed, and nothing made a claim before.
    const c = await claimFor(bb, g.id);
    expect(c.created_at_ms).toBeGreaterThanOrEqual(returned);
    expect(rec.messages.filter((m) => m.channel === 'claim_events')).toHaveLength(1);
  });

  it('docs/protocol.md row 35: restart recovery', async () => {
    const par2Hold: AgentScript = { role: 'Par2', bid: onGoal('claim'), respond: () => ({ type: 'Part2' }) };
    const { bb, rec, agents, start } = await setup([...threePhase, par2Hold], ['Idle']);
    await setAgents(
      bb,
      ['Reviewer', 'Par', 'Coder', 'Par2'].map((role) => ({ role, kind: 'standard' as const })),
    );
    const par2 = agents[3] as ScriptedAgent;
    par2.pause();
    const o1 = start();
    await o1.whenLeader();
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await claimFor(bb, g.id);
    await waitClaim(
      bb,
      c.id,
      (x) => x.phase_state?.current === 'parallel' && x.phase_state.received.Par !== undefined,
    );
    await o1.stop();

    // While it is down: Par2's output arrives, a new goal arrives, and a Holt-style paused grant exists.
    await par2.release();
    await waitFor(() => par2.outputs.length === 1, 'Par2 output');
    const g2 = newGoal();
    await bb.createArtefact(g2);
    const queuedGoal = newGoal('queued');
    await bb.createArtefact(queuedGoal);
    const queued: Claim = {
      id: randomUUID(),
      artefact_id: queuedGoal.id,
      status: 'pending_exclusive',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: '',
      grant_queue: { paused_at_ms: Date.now(), agent_name: 'Coder', position: 0 },
      phase_state: {
        current: 'exclusive',
        granted_agents: [''],
        received: {},
        all_bids: { Coder: 'exclusive' },
        start_time_ms: Date.now(),
      },
    };
    await bb.createClaim(queued);
    await bb.redis.zadd(bb.k.grantQueue('Coder'), Date.now(), queued.id);

    const o2 = start();
    await o2.whenLeader();
    await waitClaim(bb, c.id, (x) => x.status === 'complete', 'the interrupted claim completes');
    await waitClaim(
      bb,
      (await claimFor(bb, g2.id)).id,
      (x) => x.status === 'complete',
      'the goal made while down',
    );
    const q = await waitClaim(bb, queued.id, (x) => x.status === 'complete', 'the queued grant drains');
    expect(q.granted_exclusive_agent).toBe('Coder');
    expect(await bb.redis.zcard(bb.k.grantQueue('Coder'))).toBe(0);
    assertNoDuplicateGrant(rec);
  });

  it('docs/protocol.md row 35: a restart re-announces a grant still lacking output and keeps dormant claims', async () => {
    const { bb, rec, agents, start } = await setup([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
      { role: 'Idle', bid: () => 'ignore' },
    ]);
    const coder = agents[0] as ScriptedAgent;
    coder.pause();
    const o1 = start();
    await o1.whenLeader();
    const note = newGoal('n', { type: 'Note' });
    await bb.createArtefact(note);
    const dormant = await waitClaim(
      bb,
      (await claimFor(bb, note.id)).id,
      (x) => x.dormant_reason !== undefined,
    );
    // A dormant claim needs no bids and no execution: it leaves the active set the pups re-read.
    expect(await bb.activeClaimIds()).not.toContain(dormant.id);
    expect(await bb.dormantClaimIds()).toEqual([dormant.id]);
    // One made dormant before the dormant set existed (still in the active set) is moved on restart.
    const legacy = newGoal('legacy', { type: 'Note' });
    await bb.createArtefact(legacy);
    const old = await waitClaim(
      bb,
      (await claimFor(bb, legacy.id)).id,
      (x) => x.dormant_reason !== undefined,
    );
    await bb.redis.smove(bb.k.dormantClaims, bb.k.activeClaims, old.id);
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(
      bb,
      (await claimFor(bb, g.id)).id,
      (x) => x.granted_exclusive_agent === 'Coder',
    );
    await waitFor(() => coder.grants.length === 1, 'the first notification');
    o1.halt();
    // The agent lost its queued work (say it restarted): only the re-announcement can bring it back.
    coder.drop();
    const o2 = start();
    await o2.whenLeader();
    await waitFor(() => coder.grants.length >= 2, 'the re-announcement');
    await waitClaim(bb, c.id, (x) => x.status === 'complete');
    expect(rec.events('claim_granted').filter((d) => d.claim_id === c.id)).toHaveLength(1);
    // Dormant claims are reported, not terminated, by recovery (Holt terminated them).
    const after = (await bb.getClaim(dormant.id))?.claim;
    expect(after?.status).toBe('pending_review');
    expect(after?.dormant_reason).toBe('no_bids_in_any_phase');
    expect(await bb.activeClaimIds()).not.toContain(old.id);
    expect(await bb.dormantClaimIds()).toEqual(expect.arrayContaining([dormant.id, old.id]));
  });

  it('crash between any two steps: the workflow completes after restart with no duplicate grant', async () => {
    // Count the step boundaries of one clean run, then crash at each one in turn.
    const count = async (): Promise<number> => {
      const { bb, start } = await setup(threePhase);
      let n = 0;
      const o = start({}, { onStep: () => void n++ });
      await o.whenLeader();
      const g = newGoal();
      await bb.createArtefact(g);
      await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
      await o.stop();
      return n;
    };
    const boundaries = await count();
    expect(boundaries).toBeGreaterThan(5);
    for (let k = 1; k <= boundaries; k++) {
      const { bb, rec, start } = await setup(threePhase);
      let n = 0;
      let crashed = false;
      const victim: Orchestrator = start(
        { leaseTtlMs: 300 },
        {
          onStep: (name) => {
            if (++n === k) {
              crashed = true;
              victim.halt();
              throw new Error(`crash injected at ${name}`);
            }
          },
        },
      );
      await victim.whenLeader();
      const g = newGoal();
      await bb.createArtefact(g);
      await waitFor(() => crashed, `crash ${k}`);
      const heir = start({ leaseTtlMs: 300 });
      await heir.whenLeader();
      const c = await waitClaim(
        bb,
        (await claimFor(bb, g.id)).id,
        (x) => x.status === 'complete',
        `complete after crash ${k}`,
      );
      expect(c.granted_exclusive_agent).toBe('Coder');
      assertNoDuplicateGrant(rec);
      await heir.stop();
      for (const fn of cleanups.splice(0).reverse()) await fn();
    }
  });

  it('the registry is runtime data: a change applies to new claims without a restart', async () => {
    const { bb, start, agents } = await setup([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
      { role: 'Extra', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
    ]);
    await setAgents(bb, [{ role: 'Coder', kind: 'standard' }]);
    const o = start({ bidTimeoutMs: 60_000 });
    await o.whenLeader();
    const g1 = newGoal();
    await bb.createArtefact(g1);
    const c1 = await waitClaim(bb, (await claimFor(bb, g1.id)).id, (x) => x.status === 'complete');
    expect(c1.expected_bidders).toEqual(['Coder']);
    expect(c1.granted_exclusive_agent).toBe('Coder');

    // Register Extra (byte-wise first): new claims wait for it and it wins the tie.
    await setAgents(bb, [
      { role: 'Coder', kind: 'standard' },
      { role: 'Extra', kind: 'standard' },
      { role: 'Aaa', kind: 'standard' },
    ]);
    const g2 = newGoal();
    await waitFor(async () => {
      // The change notification is asynchronous; a claim made before it still uses the old snapshot.
      const probe = newGoal();
      await bb.createArtefact(probe);
      return (await claimFor(bb, probe.id)).expected_bidders?.includes('Aaa');
    }, 'the new registry');
    await bb.createArtefact(g2);
    const c2 = await claimFor(bb, g2.id);
    expect(c2.expected_bidders).toEqual(['Aaa', 'Coder', 'Extra']);
    // Aaa never bids: the claim waits (consensus is on the snapshot), and a bid releases it.
    await waitFor(async () => Object.keys(await bb.getBids(c2.id)).length === 2, 'two bids');
    expect((await bb.getClaim(c2.id))?.claim.phase_state ?? null).toBeNull();
    await bb.setBid(c2.id, 'Aaa', 'ignore');
    const done = await waitClaim(bb, c2.id, (x) => x.status === 'complete');
    expect(done.granted_exclusive_agent).toBe('Coder');
    expect(agents[1]?.grants.length ?? 0).toBe(0);
  });

  it('bad data never stops a leader: malformed claims and artefacts are quarantined once, reported, and the rest runs', async () => {
    const { bb, rec, start } = await setup([
      {
        role: 'Coder',
        bid: onGoal('exclusive'),
        respond: () => ({ structural_type: 'Terminal', type: 'Done' }),
      },
    ]);
    const k = bb.k;
    // Before any leader: a poison claim in the active set and one in the dormant set, an indexed
    // artefact that does not parse, and a goal one of whose children does not parse.
    const [poison, dormant, badArtefact, badChild] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    await bb.redis.hset(k.claim(poison), {
      id: poison,
      artefact_id: randomUUID(),
      granted_review_agents: '{x',
    });
    await bb.redis.sadd(k.activeClaims, poison);
    await bb.redis.hset(k.claim(dormant), { id: dormant, status: 'no-such-status' });
    await bb.redis.sadd(k.dormantClaims, dormant);
    await bb.redis.hset(k.artefact(badArtefact), { id: badArtefact, version: 'one' });
    await bb.redis.zadd(k.artefactIndex, Date.now(), badArtefact);
    const g = newGoal('with a bad child');
    await bb.createArtefact(g);
    await bb.redis.hset(k.artefact(badChild), { id: badChild, source_artefacts: '[' });
    await bb.redis.sadd(k.children(g.id), badChild);
    const o = start();
    await o.whenLeader(); // recovery finished: the poison did not stop it
    await waitClaim(bb, (await claimFor(bb, g.id)).id, (c) => c.status === 'complete', 'the goal completes');
    // A poison claim that appears while the leader runs is met by the next reconcile pass.
    const late = randomUUID();
    await bb.redis.hset(k.claim(late), { id: late, rev: 'x', granted_parallel_agents: 'nope' });
    await bb.redis.sadd(k.activeClaims, late);
    const want = [
      `artefact:${badArtefact}`,
      `artefact:${badChild}`,
      `claim:${dormant}`,
      `claim:${late}`,
      `claim:${poison}`,
    ];
    const listed = await waitFor(async () => {
      const q = await readQuarantine(bb);
      const keys = q.map((x) => `${x.kind}:${x.id}`).sort();
      return want.every((w) => keys.includes(w)) ? q : null;
    }, 'every bad item quarantined');
    expect(listed.every((q) => q.reason === 'malformed' && (q.detail ?? '').length > 0)).toBe(true);
    expect(await bb.redis.smembers(k.activeClaims)).not.toContain(poison);
    expect(await bb.redis.sismember(k.activeClaims, late)).toBe(0);
    expect(await bb.redis.sismember(k.dormantClaims, dormant)).toBe(0);
    await o.quarantine.settled();
    // A new leader reads everything again (recovery and a first full pass) and reports nothing twice.
    await o.stop();
    const next = start();
    await next.whenLeader();
    await next.quarantine.settled();
    await waitFor(async () => rec.events('quarantined').length >= want.length, 'the events');
    const reported = rec.events('quarantined').map((d) => `${d.kind}:${d.id}`);
    expect(reported.sort()).toEqual([...want].sort());
    const counted = (await o.metrics.quarantined.get()).values.filter((v) => v.labels.reason === 'malformed');
    expect(counted.reduce((n, v) => n + v.value, 0)).toBe(want.length);
  });

  it("the leader publishes each role's open grants (agent_load); the next leader carries on", async () => {
    const { bb, start, agents } = await setup(threePhase);
    const par = agents[1];
    if (!par) throw new Error('Par agent expected');
    par.pause(); // the parallel grant stays open
    const o = start({ loadIntervalMs: 50 });
    await o.whenLeader();
    const goals = [newGoal('a'), newGoal('b')];
    for (const g of goals) await bb.createArtefact(g);
    const load = () => readAgentLoad(bb.redis, bb.k.agentLoad);
    await waitFor(async () => (await load())?.in_flight.Par === 2, 'Par holds two open grants');
    expect((await load())?.in_flight).toEqual({ Par: 2 });
    await par.release();
    await waitFor(async () => {
      const l = await load();
      return l && Object.keys(l.in_flight).length === 0;
    }, 'no open grant');
    for (const g of goals) await waitClaim(bb, (await claimFor(bb, g.id)).id, (c) => c.status === 'complete');
    await o.stop();
    const last = (await load())?.updated_at_ms;
    await bb.redis.del(bb.k.agentLoad);
    const other = start({ loadIntervalMs: 50 });
    await other.whenLeader();
    await waitFor(async () => ((await load())?.updated_at_ms ?? 0) > (last ?? 0), 'the new leader publishes');
  });

  it('grants to scalable roles go to the injected dispatcher', async () => {
    const handed: Grant[] = [];
    const pool: GrantDispatcher = {
      async dispatch(g) {
        handed.push(g);
      },
    };
    const { bb, start } = await setup([{ role: 'Coder', bid: onGoal('exclusive') }]);
    await setAgents(bb, [{ role: 'Coder', kind: 'scalable', worker_target: 'coder' }]);
    const o = start({}, { scalableDispatcher: pool });
    await o.whenLeader();
    await waitFor(async () => {
      const g = newGoal();
      await bb.createArtefact(g);
      const c = await claimFor(bb, g.id);
      return (await waitClaim(bb, c.id, (x) => x.phase_state !== undefined)).granted_exclusive_agent ===
        'Coder'
        ? handed.length > 0
        : false;
    }, 'a scalable grant');
    expect(handed[0]).toMatchObject({
      role: 'Coder',
      claimType: 'exclusive',
      phase: 'exclusive',
      reason: 'grant',
    });
    expect(handed[0]?.claim.granted_exclusive_agent).toBe('Coder');
  });

  it('a claim of ten bids, a grant and a completion costs one step read, and never the claim hash written here', async () => {
    const instance = `reads${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    const roles = Array.from({ length: 10 }, (_, i) => `agent${i}`);
    await register(bb, roles);
    const agents = await Promise.all(
      roles.map((role) =>
        ScriptedAgent.start(redis.url, instance, {
          role,
          bid: () => (role === 'agent0' ? 'exclusive' : 'ignore'),
          respond: () => ({ structural_type: 'Terminal', type: 'Done' }),
        }),
      ),
    );
    // No poll and no reconcile pass during the test: every read is one the claim's events asked for.
    const orch = startOrchestrator(redis.url, instance, { bidPollMs: 600_000, reconcileIntervalMs: 600_000 });
    await orch.whenLeader();
    const seen: Monitored[] = [];
    const monitor = await monitorCommands(bb.redis, seen);
    const commands = () => seen.filter((m) => !m.fromScript).map((m) => m.args);
    const fromScripts = () => seen.filter((m) => m.fromScript).map((m) => m.args);
    try {
      const g = newGoal();
      await bb.createArtefact(g);
      const c = await claimFor(bb, g.id);
      await waitClaim(bb, c.id, (x) => x.status === 'complete');
      const claimKey = bb.k.claim(c.id);
      const calls = (sha: string) =>
        commands().filter((a) => a[0]?.toLowerCase() === 'evalsha' && a[1] === sha && a[3] === claimKey);
      // The monitor stream is in order: once it shows the completing write, every read before it is in.
      await waitFor(() => calls(updateClaimsScript.sha).length >= 2, 'the grant and the completion');
      const snapshots = () => calls(claimSnapshotScript.sha);
      // The first step decides on the claim as created (no read); one read before the grant (after
      // the last bid); the completion decides on what the output's own script read (its claim's rev
      // and the goal's children).
      expect(snapshots()).toHaveLength(1);
      // Every read found the claim at the rev this orchestrator wrote, so its hash never came back
      // (the reads checked the rev alone; the agents' own reads are not scripts).
      const inScripts = (cmd: string) =>
        fromScripts().filter((a) => a[0]?.toLowerCase() === cmd && a[1] === claimKey);
      expect(inScripts('hgetall')).toEqual([]);
    } finally {
      monitor.disconnect();
      await orch.stop();
      for (const a of agents) await a.stop();
      await bb.close();
    }
  });
});
