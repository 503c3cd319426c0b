import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import { Pup } from '../pup/pup.ts';
import { config, node } from '../pup/testkit.ts';
import type { Orchestrator } from './orchestrator.ts';
import { claimFor, newGoal, recordChannels, register, startOrchestrator, waitClaim } from './testkit.ts';

// Issue 29: the first goal of a new Holt was lost. Its claim was made while two agents' pups were
// still starting; the bid timeout closed consensus without them (no_bids_in_any_phase) and nothing
// revived the claim once they were up. Now the claim keeps its silent agents, a starting pup bids on
// the dormant claims it was silent on, and that late bid re-opens the bidding. Real Redis, real pup.

let redis: RedisServer;
let ws: string;
beforeAll(async () => {
  redis = await startRedis();
  ws = makeTempDir('revive-ws');
});
afterAll(async () => {
  await redis?.stop();
  removeDir(ws);
});
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function pupFor(instance: string, role: string): Pup {
  const pup = new Pup(
    config({
      REDIS_URL: redis.url,
      HOLT_INSTANCE_NAME: instance,
      HOLT_AGENT_NAME: role,
      HOLT_WORKSPACE: ws,
      HOLT_AGENT_COMMAND: JSON.stringify(node('echo.mjs')),
      HOLT_BIDDING_STRATEGY: 'exclusive',
    }),
  );
  cleanups.push(() => pup.stop(0));
  return pup;
}

async function dormantGoal(instance: string, orch: Orchestrator) {
  const bb = Blackboard.connect(redis.url, instance);
  cleanups.push(() => bb.close());
  await register(bb, ['Coder']);
  await orch.whenLeader();
  const goal = newGoal();
  await bb.createArtefact(goal);
  const claim = await claimFor(bb, goal.id);
  // No pup of the role runs: the bid timeout closes consensus without it.
  const dormant = await waitClaim(bb, claim.id, (c) => c.dormant_reason !== undefined, 'dormant');
  expect(dormant).toMatchObject({ dormant_reason: 'no_bids_in_any_phase', silent_agents: ['Coder'] });
  expect(await bb.dormantClaimIds()).toContain(claim.id);
  return { bb, claim };
}

describe('a claim made while an agent is down', () => {
  it('goes dormant naming the agent; its pup starts, bids late, and the claim re-opens and completes', async () => {
    const instance = `rv${randomUUID().slice(0, 8)}`;
    const rec = await recordChannels(redis.url, instance);
    cleanups.push(() => rec.close());
    const orch = startOrchestrator(redis.url, instance, { bidTimeoutMs: 300 });
    cleanups.push(() => orch.stop());
    const { bb, claim } = await dormantGoal(instance, orch);

    await pupFor(instance, 'Coder').start();
    const done = await waitClaim(bb, claim.id, (c) => c.status === 'complete', 'the claim complete');
    expect(done.granted_exclusive_agent).toBe('Coder');
    expect(await bb.getArtefact(outputId(instance, claim.id, 'Coder', 'exclusive'))).not.toBeNull();
    await eventually(
      'the bidding_reopened event',
      async () => rec.events('bidding_reopened').length > 0 || undefined,
    );
    expect(rec.events('bidding_reopened')[0]).toEqual({ claim_id: claim.id, late_bidders: ['Coder'] });
  });

  it('the same across a new leadership term (the late bid found by recovery, not by memory)', async () => {
    const instance = `rv${randomUUID().slice(0, 8)}`;
    const first = startOrchestrator(redis.url, instance, { bidTimeoutMs: 300 });
    const { bb, claim } = await dormantGoal(instance, first);
    await first.stop();
    // The pup bids while no orchestrator leads: its event is heard by nobody.
    const pup = pupFor(instance, 'Coder');
    await pup.start();
    await eventually('the late bid', async () => (await bb.getBids(claim.id)).Coder);
    const second = startOrchestrator(redis.url, instance, { bidTimeoutMs: 300 });
    cleanups.push(() => second.stop());
    const done = await waitClaim(bb, claim.id, (c) => c.status === 'complete', 'the claim complete');
    expect(done.granted_exclusive_agent).toBe('Coder');
  });
});
