import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/wait.ts';
import { claimIdsForArtefacts, indexArtefacts } from '../blackboard/claim-engine.ts';
import { Blackboard } from '../blackboard/client.ts';
import { artefactToHash } from '../blackboard/codec.ts';
import { lockHolder } from '../blackboard/instance-lease.ts';
import { hasBids } from '../blackboard/pup-reads.ts';
import type { Artefact } from '../blackboard/types.ts';
import { silentLogger } from '../common/logger.ts';
import { type GrantDispatcher, HoltDispatcher } from './dispatch.ts';
import { LeaderTerm } from './leader-term.ts';
import { OrchestratorMetrics } from './metrics.ts';
import { Quarantine } from './quarantine.ts';
import { assertNoDuplicateGrant, onGoal, resilienceKit } from './resilience.testkit.ts';
import { claimFor, newGoal, testConfig, waitClaim } from './testkit.ts';

const { redis, setup, cleanups } = resilienceKit();

describe('orchestrator resilience: events missed, writes failed, leases lost', () => {
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
    const ids = await eventually('all 100 claims with the Coder bid', async () => {
      const found = await claimIdsForArtefacts(
        bb,
        goals.map((g) => g.id),
      );
      if (found.some((id) => !id)) return null;
      const coder = await hasBids(bb, found as string[], 'Coder');
      return coder.every(Boolean) ? (found as string[]) : null;
    });
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
    await eventually('the Coder bid', async () => (await hasBids(bb, [c.id], 'Coder'))[0]);
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
    await eventually('the failed claim creation', () => attempts > 0);
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
    await eventually('the subscription to close', async () => (await subscribers()) === 0);
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
    await eventually('a to stand down', () => !a.isLeader());
    // Its subscription is gone: nobody but the recorder hears of new artefacts.
    const numsub = async () =>
      ((await bb.redis.pubsub('NUMSUB', bb.k.channels.artefactEvents)) as [string, number])[1];
    await eventually('the old term to unsubscribe', async () => (await numsub()) === 0);
    const g = newGoal();
    await bb.createArtefact(g);
    await eventually('the artefact event to be delivered', () =>
      rec.messages.some((m) => m.channel === 'artefact_events' && (m.msg as Artefact).id === g.id),
    );
    const returned = Date.now();
    await bb.redis.del(`${bb.k.lock}:holder`, bb.k.lock);
    await a.whenLeader();
    // The new term's reconcile finds the artefact the old one missed, and nothing made a claim before.
    const c = await claimFor(bb, g.id);
    expect(c.created_at_ms).toBeGreaterThanOrEqual(returned);
    expect(rec.messages.filter((m) => m.channel === 'claim_events')).toHaveLength(1);
  });
});
