import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { Blackboard } from '../blackboard/client.ts';
import type { Artefact } from '../blackboard/types.ts';
import { silentLogger } from '../common/logger.ts';
import { claim as newClaim } from '../pup/testkit.ts';
import { HoltDispatcher } from './dispatch.ts';
import { OrchestratorMetrics } from './metrics.ts';
import { Quarantine } from './quarantine.ts';
import { ClaimStepper } from './step.ts';
import { newGoal } from './testkit.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const output = (goal: Artefact, role: string): Artefact =>
  newGoal(`from ${role}`, {
    type: 'Work',
    source_artefacts: [goal.id],
    produced_by_role: role,
    logical_id: randomUUID(),
  });

/** A stepper of its own on `bb`, for a leader that never loses its lease. */
function stepperOn(bb: Blackboard, roles: string[], targetCacheBytes?: number): ClaimStepper {
  const registered = new Set(roles);
  return new ClaimStepper({
    bb,
    policy: { bidTimeoutMs: 60_000, maxReviewIterations: 3 },
    bidPollMs: 1_000,
    targetCacheBytes,
    dispatcher: new HoltDispatcher(bb),
    log: silentLogger(),
    metrics: new OrchestratorMetrics(),
    registered: () => registered,
    alive: () => true,
    kick: () => undefined,
    quarantine: new Quarantine({
      bb: () => bb,
      log: silentLogger(),
      metrics: new OrchestratorMetrics(),
      alive: () => true,
    }),
  });
}

describe('ClaimStepper: reads made ahead by outputs’ scripts', () => {
  it('two reads of the same claim handled out of order are merged: the step sees every output', async () => {
    const bb = Blackboard.connect(redis.url, `step${randomUUID().slice(0, 8)}`);
    const stepper = stepperOn(bb, ['A', 'B']);
    try {
      const goal = newGoal();
      await bb.createArtefact(goal);
      const claim = newClaim(goal.id, { expected_bidders: ['A', 'B'], created_at_ms: Date.now() });
      await bb.createClaim(claim);
      stepper.noteCreated(claim, goal);
      await bb.setBid(claim.id, 'A', 'claim');
      await bb.setBid(claim.id, 'B', 'claim');
      await stepper.step(claim.id); // decides on the claim as created: waits for bids
      await stepper.step(claim.id); // reads both bids: the parallel phase, granted to A and B
      const granted = await bb.getClaim(claim.id);
      expect(granted?.claim.status).toBe('pending_parallel');
      // Both outputs are written. The script of A's saw only A's; the script of B's saw both, and
      // its reply is handled first.
      const a = output(goal, 'A');
      const b = output(goal, 'B');
      await bb.createArtefact(a);
      await bb.createArtefact(b);
      const rev = granted?.rev ?? 0;
      stepper.sourceRead(claim.id, {
        rev,
        children: new Map([
          [a.id, a],
          [b.id, b],
        ]),
      });
      stepper.sourceRead(claim.id, { rev, children: new Map([[a.id, a]]) });
      await stepper.step(claim.id);
      // Both outputs in: the parallel phase ends (with no exclusive bid, nothing is left to grant).
      const after = (await bb.getClaim(claim.id))?.claim;
      expect(after?.phase_state?.received).toEqual({ A: a.id, B: b.id });
      expect(after?.dormant_reason).toBe('no_grants_remaining_after_parallel');
    } finally {
      await bb.close();
    }
  });
});

describe('ClaimStepper: bounded memory', () => {
  it('the cached targets stay under their byte bound, however large the payloads; steps still read what they need', async () => {
    const bb = Blackboard.connect(redis.url, `cap${randomUUID().slice(0, 8)}`);
    const cap = 300_000;
    const stepper = stepperOn(bb, ['A'], cap);
    try {
      const claims = [];
      for (let i = 0; i < 8; i++) {
        const goal = newGoal('x'.repeat(100_000)); // ~200 kB each in memory: at most one fits
        await bb.createArtefact(goal);
        const claim = newClaim(goal.id, { expected_bidders: ['A'], created_at_ms: Date.now() });
        await bb.createClaim(claim);
        await bb.setBid(claim.id, 'A', 'exclusive');
        claims.push(claim);
        await stepper.step(claim.id);
        expect(stepper.cachedTargetBytes()).toBeLessThanOrEqual(cap);
      }
      expect(stepper.cachedTargetBytes()).toBeGreaterThan(0);
      // Every claim was still granted: a target that left the cache is read again.
      for (const c of claims) expect((await bb.getClaim(c.id))?.claim.granted_exclusive_agent).toBe('A');
    } finally {
      await bb.close();
    }
  });
});
