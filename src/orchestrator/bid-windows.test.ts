import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { afterLate, afterOnTime, BidWindows, windowFor } from './bid-windows.ts';
import { decide, type Snapshot } from './decide.ts';
import {
  claimFor,
  newGoal,
  recordChannels,
  register,
  ScriptedAgent,
  startOrchestrator,
  waitClaim,
} from './testkit.ts';

const B = { baseMs: 300, maxMs: 1200 };

describe('bid windows (pure)', () => {
  it('a late bid widens to 1.5 × its latency at once, never past the maximum nor below what it was', () => {
    expect(afterLate(300, 450, B)).toBe(675);
    expect(afterLate(900, 450, B)).toBe(900);
    expect(afterLate(300, 5_000, B)).toBe(1200);
    expect(afterLate(300, 10, B)).toBe(300);
    // A maximum below the base disables the widening (the base wins).
    expect(afterLate(300, 450, { baseMs: 300, maxMs: 100 })).toBe(300);
  });

  it('bids in time narrow a widened window slowly back to the base; a tight one widens to fit them', () => {
    let w = 1200;
    const seen: number[] = [];
    for (let i = 0; i < 200; i++) {
      w = afterOnTime(w, 20, B);
      seen.push(w);
    }
    expect(seen[0]).toBeLessThan(1200);
    expect(seen[0]).toBeGreaterThan(1000); // slow: one fast bid does not undo a late one
    expect(seen.every((x, i) => i === 0 || x <= (seen[i - 1] as number))).toBe(true);
    expect(seen.at(-1)).toBe(300);
    expect(afterOnTime(300, 280, B)).toBe(420);
    expect(afterOnTime(600, 380, B)).toBe(597);
  });

  it('a claim waits as long as the widest window of the bidders it still expects', () => {
    const w = new Map([
      ['Slow', 900],
      ['Slower', 1100],
    ]);
    expect(windowFor(['Fast', 'Slow'], w, 300)).toBe(900);
    expect(windowFor(['Fast'], w, 300)).toBe(300);
    expect(windowFor([], w, 300)).toBe(300);
    expect(windowFor(['Slow', 'Slower'], undefined, 300)).toBe(300);
  });

  it("decide: a claim's deadline is the widest window of the bidders still missing; the bid_timeout names it", () => {
    const target = newGoal();
    const claim: Claim = {
      id: 'c1',
      artefact_id: target.id,
      status: 'pending_review',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: '',
      expected_bidders: ['Fast', 'Slow'],
      created_at_ms: 1_000,
    };
    const s: Snapshot = {
      claim,
      target,
      bids: {},
      outputs: [],
      registered: new Set(['Fast', 'Slow']),
      firstSeenMs: 0,
      now: 1_350,
      policy: { bidTimeoutMs: 300, maxReviewIterations: 3 },
      bidWindows: new Map([['Slow', 675]]),
    };
    // Without windows the claim closes at 1300 (Holt's rule); with Slow's it waits to 1675.
    expect(decide({ ...s, bidWindows: undefined }).kind).toBe('write');
    expect(decide(s)).toEqual({ kind: 'wait', untilMs: 1_675, missing: ['Fast', 'Slow'] });
    // Slow is in: only Fast's window (the base) counts, already past.
    const slowIn = decide({ ...s, bids: { Slow: 'claim' } });
    if (slowIn.kind !== 'write') throw new Error(slowIn.kind);
    expect(slowIn.claim.phase_state?.all_bids).toEqual({ Fast: 'ignore', Slow: 'claim' });
    const closed = decide({ ...s, bids: { Fast: 'exclusive' }, now: 1_675 });
    if (closed.kind !== 'write') throw new Error(closed.kind);
    expect(closed.after).toContainEqual({
      kind: 'event',
      event: { event: 'bid_timeout', data: { claim_id: 'c1', silent_agents: ['Slow'], timeout_ms: 675 } },
    });
  });

  it('BidWindows keeps only widened windows, per role', () => {
    const w = new BidWindows(B);
    expect(w.late('Slow', 450)).toBe(675);
    expect(w.onTime('Fast', 10)).toBe(300);
    expect([...w.windows]).toEqual([['Slow', 675]]);
    for (let i = 0; i < 100; i++) w.onTime('Slow', 10);
    expect(w.windows.size).toBe(0);
  });
});

describe('a slow but alive bidder (issue 29 item 8, real Redis)', () => {
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

  it('an agent whose bids take 1.5 × the bid timeout wins its claims after its first late bid', async () => {
    const instance = `w${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    await register(bb, ['Coder', 'Slow']);
    const rec = await recordChannels(redis.url, instance);
    const isGoal = (a: Artefact) => a.type === 'GoalDefined';
    const coder = await ScriptedAgent.start(redis.url, instance, {
      role: 'Coder',
      bid: (a) => (isGoal(a) ? 'exclusive' : 'ignore'),
      respond: () => ({ type: 'Code', payload: 'done' }),
    });
    const slow = await ScriptedAgent.start(redis.url, instance, {
      role: 'Slow',
      bid: (a) => (isGoal(a) ? 'claim' : 'ignore'),
      bidDelayMs: 450,
      respond: () => ({ type: 'Notes', payload: 'done' }),
    });
    const orch = startOrchestrator(redis.url, instance, { bidTimeoutMs: 300 });
    await orch.whenLeader();
    cleanups.push(async () => {
      await orch.stop();
      await coder.stop();
      await slow.stop();
      rec.close();
      await bb.close();
    });
    // Goals one after another: the first goes on without Slow (its bid is late, and reported so);
    // a later one waits for it. Outcomes only: how late each bid was is up to the machine.
    let lateAt = -1;
    let grantedAt = -1;
    for (let i = 0; i < 6 && grantedAt < 0; i++) {
      const g = newGoal(`goal ${i}`);
      await bb.createArtefact(g);
      const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
      if (c.phase_state?.all_bids?.Slow === 'claim') {
        if (lateAt >= 0) grantedAt = i;
        expect(slow.executed.has(c.id)).toBe(true);
        continue;
      }
      expect(c.phase_state?.all_bids).toEqual({ Coder: 'exclusive', Slow: 'ignore' });
      await eventually(`the bid_late of goal ${i}`, () =>
        rec.events('bid_late').find((e) => e.claim_id === c.id && e.agent_name === 'Slow'),
      );
      if (lateAt < 0) lateAt = i;
    }
    expect(lateAt).toBeGreaterThanOrEqual(0);
    expect(grantedAt).toBeGreaterThan(lateAt);
  });
});
