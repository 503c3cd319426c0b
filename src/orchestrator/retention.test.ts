import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { readRetentionReport } from '../blackboard/retention-report.ts';
import type { Artefact } from '../blackboard/types.ts';
import { silentLogger } from '../common/logger.ts';
import type { Orchestrator } from './orchestrator.ts';
import { startRetention } from './retention.ts';
import { newGoal, register, ScriptedAgent, startOrchestrator } from './testkit.ts';

const DAY = 86_400_000;

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** The ids of every artefact of the instance, in creation order. */
const allArtefacts = (bb: Blackboard) => bb.listArtefactIds();

describe('retention on a running orchestrator (real Redis, real workflows)', () => {
  it('removes finished workflows, keeps running ones, reports what it did, and the Holt works on', async () => {
    const I = `ret-${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, I);
    // Registered before the orchestrator starts, so its first claims already expect both bidders.
    await register(bb, ['coder', 'closer']);
    const orch: Orchestrator = startOrchestrator(redis.url, I);
    // A coder that answers every goal but the ones saying "hang", and a closer that ends each workflow.
    const coder = await ScriptedAgent.start(redis.url, I, {
      role: 'coder',
      bid: (t) => (t.type === 'GoalDefined' ? 'exclusive' : 'ignore'),
      respond: ({ target }) => (target.payload === 'hang' ? null : { type: 'Code', payload: 'done' }),
    });
    const closer = await ScriptedAgent.start(redis.url, I, {
      role: 'closer',
      bid: (t) => (t.type === 'Code' ? 'exclusive' : 'ignore'),
      respond: () => ({ structural_type: 'Terminal', type: 'Done', payload: '' }),
    });
    const terminals = async () => {
      const ids = await allArtefacts(bb);
      return (await bb.getArtefacts(ids)).filter((a): a is Artefact => a?.structural_type === 'Terminal');
    };
    let leader = false;
    let clock = Date.now();
    const registry = new Registry();
    const retention = startRetention({
      bb,
      isLeader: () => leader,
      log: silentLogger(),
      days: 7,
      sweepMs: 3_600_000,
      registry,
      now: () => clock,
    });
    try {
      await eventually('the orchestrator leads', async () => orch.isLeader());
      for (const p of ['one', 'two', 'hang']) await bb.createArtefact(newGoal(p));
      await eventually('two workflows finished', async () => (await terminals()).length === 2);
      const hung = await eventually(
        'the hung goal',
        async () =>
          (await bb.getArtefacts(await allArtefacts(bb))).find((a) => a?.payload === 'hang') ?? null,
      );
      expect((await allArtefacts(bb)).length).toBe(7); // 2 × (goal, code, terminal) + the hung goal

      // Today, nothing is old: a pass removes nothing. A standby never runs one.
      expect(await retention.pass()).toBeNull();
      leader = true;
      expect((await retention.pass())?.last.workflows).toBe(0);

      // Eight days on, the finished two go; the hung one stays, counted as unfinished.
      clock += 8 * DAY;
      const r = await retention.pass();
      expect(r).toMatchObject({
        days: 7,
        last: { workflows: 2, artefacts: 6, claims: 4 },
        kept: { unfinished: 1 },
      });
      expect(await allArtefacts(bb)).toEqual([hung.id]);
      expect(await readRetentionReport(bb.redis, bb.k.retention)).toEqual(r);
      expect(await registry.getSingleMetricAsString('holt_orchestrator_retention_pruned_total')).toContain(
        'holt_orchestrator_retention_pruned_total{what="workflows"} 2',
      );

      // The orchestrator carries on: a new goal runs to its end, and totals add up across passes.
      await bb.createArtefact(newGoal('three'));
      await eventually('a new workflow finished after pruning', async () => (await terminals()).length === 1);
      clock += 8 * DAY;
      const again = await retention.pass();
      expect(again?.last.workflows).toBe(1);
      expect(again?.total).toMatchObject({ workflows: 3, artefacts: 9 });
    } finally {
      retention.stop();
      await Promise.all([coder.stop(), closer.stop()]);
      await orch.stop();
      await bb.close();
    }
  });

  it('reports a failed pass (the store gone) in the report and carries on: no throw', async () => {
    const I = `ret-${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, I);
    const failing = async () => {
      throw new Error('Postgres: connection refused');
    };
    const retention = startRetention({
      bb,
      isLeader: () => true,
      log: silentLogger(),
      days: 1,
      sweepMs: 3_600_000,
      postgres: failing,
    });
    try {
      const r = await retention.pass();
      expect(r?.error).toBe('Postgres: connection refused');
      expect(r?.total.workflows).toBe(0);
    } finally {
      retention.stop();
      await bb.close();
    }
  });
});
