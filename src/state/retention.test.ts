import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { readRetentionReport } from '../blackboard/retention-report.ts';
import type { Claim } from '../blackboard/types.ts';
import { silentLogger } from '../common/logger.ts';
import { InboxStore } from '../inbox/store.ts';
import { UsageStore } from '../llm/stores/usage-store.ts';
import { InboxDispatcher } from '../orchestrator/inbox-dispatcher.ts';
import { startRetention } from '../orchestrator/retention.ts';
import { migrate } from './migrate.ts';
import { pruneFinished } from './retention.ts';

let pgs: PostgresServer;
let redis: RedisServer;
let nats: NatsServer;
let store: InboxStore;
beforeAll(async () => {
  [pgs, redis, nats] = await Promise.all([startPostgres(), startRedis(), startNats()]);
  await migrate(pgs.url);
  store = InboxStore.connect(pgs.url);
});
afterAll(async () => {
  await store?.close();
  await Promise.all([pgs?.stop(), redis?.stop(), nats?.stop()]);
});

const DAY = 86_400_000;
const claimOf = (): Claim => ({
  id: randomUUID(),
  artefact_id: randomUUID(),
  status: 'pending_parallel',
  granted_review_agents: [],
  granted_parallel_agents: ['W'],
  granted_exclusive_agent: '',
});

describe('retention (real Postgres)', () => {
  it('finished work older than the cut-off goes, with its steps and rows; live, unreported and recent work stays; usage totals stay', async () => {
    const I = 'keep';
    const d = new InboxDispatcher({ store, instance: I, targetOf: () => 'w', ring: () => undefined });
    const claims = {
      oldDone: claimOf(),
      oldFailedUnreported: claimOf(),
      oldPending: claimOf(),
      newDone: claimOf(),
    };
    for (const c of Object.values(claims))
      await d.dispatch({ claim: c, role: 'W', claimType: 'claim', phase: 'parallel' });
    const q = (sql: string, params: unknown[]) => store.pool.query(sql, params);
    const set = async (c: Claim, row: string, turn: string, ageDays: number, reported = true) => {
      await q(
        `UPDATE holt.agent_inbox SET status = $2, failure_reported = $4, updated_at = now() - $3::interval WHERE claim_id = $1`,
        [c.id, row, `${ageDays} days`, reported],
      );
      await q(
        `UPDATE holt.agent_turns SET status = $2, ended_at = now() - $3::interval WHERE claim_id = $1`,
        [c.id, turn, `${ageDays} days`],
      );
      await q(
        `UPDATE holt.agent_state_head SET status = 'idle', active_turn_id = NULL, updated_at = now() - $2::interval WHERE claim_id = $1`,
        [c.id, `${ageDays} days`],
      );
    };
    await set(claims.oldDone, 'done', 'done', 10);
    await set(claims.oldFailedUnreported, 'failed', 'failed', 10, false);
    await set(claims.newDone, 'done', 'done', 1);
    // oldPending stays pending (live), but its turn is old.
    await q(`UPDATE holt.agent_turns SET created_at = now() - interval '10 days' WHERE claim_id = $1`, [
      claims.oldPending.id,
    ]);
    const t = (
      await q('SELECT turn_id, actor_id FROM holt.agent_turns WHERE claim_id = $1', [claims.oldDone.id])
    ).rows[0];
    for (const seq of [1, 2])
      await q(
        `INSERT INTO holt.agent_steps (step_id, instance, actor_id, turn_id, turn_epoch, seq, kind)
         VALUES ($1, $2, $3, $4, 0, $5, 'model')`,
        [randomUUID(), I, t.actor_id, t.turn_id, seq],
      );
    const turns = new UsageStore(store.pool);
    const u = { promptTokens: 1, completionTokens: 0, totalTokens: 1 };
    await turns.addUsage(I, 'W', null, 'turn', u, 2);
    await q(`UPDATE holt.llm_usage SET at = now() - interval '10 days' WHERE instance = $1`, [I]);
    await turns.addUsage(I, 'W', null, 'turn', u, 1);

    // Goal plans: one no turn has touched for ten days goes, a fresh one stays.
    await q(
      `INSERT INTO holt.llm_plans (instance, role, goal_id, plan, updated_at) VALUES
         ($1, 'W', 'old-goal', '{}', now() - interval '10 days'), ($1, 'W', 'new-goal', '{}', now())`,
      [I],
    );
    // A living agent's: an old delivered message and an old ended wait go, with an old audit row and the
    // delivery of a turn that is gone; what is undelivered, waiting or new stays.
    await q(
      `INSERT INTO holt.agent_messages (instance, role, idempotency_key, kind, body, labels, turn_id, delivered_at)
       VALUES ($1, 'W', 'old', 'message', 'x', '{}', gen_random_uuid(), now() - interval '10 days'),
              ($1, 'W', 'undelivered', 'message', 'x', '{}', NULL, NULL),
              ($1, 'W', 'new', 'message', 'x', '{}', gen_random_uuid(), now())`,
      [I],
    );
    await q(
      `INSERT INTO holt.agent_waits (id, instance, role, kind, on_what, state, ended_at) VALUES
         (gen_random_uuid(), $1, 'W', 'timer', 'old', 'resolved', now() - interval '10 days'),
         (gen_random_uuid(), $1, 'W', 'timer', 'live', 'waiting', NULL)`,
      [I],
    );
    await q(
      `INSERT INTO holt.life_audit (instance, role, decision, at) VALUES ($1, 'W', 'start', now() - interval '10 days'), ($1, 'W', 'start', now())`,
      [I],
    );
    await q(
      `INSERT INTO holt.life_turns (turn_id, instance, role, seq, delivery, created_at) VALUES (gen_random_uuid(), $1, 'W', 1, '{}', now() - interval '10 days')`,
      [I],
    );
    const pruned = await pruneFinished(store.pool, I, 7 * DAY, 1);
    expect(pruned).toEqual({
      turns: 1,
      steps: 2,
      rows: 1,
      heads: 1,
      usage: 1,
      plans: 1,
      life: 4,
      memories: 0,
    });
    expect(
      (await q('SELECT idempotency_key FROM holt.agent_messages WHERE instance = $1 ORDER BY id', [I])).rows,
    ).toEqual([{ idempotency_key: 'undelivered' }, { idempotency_key: 'new' }]);
    expect((await q('SELECT on_what FROM holt.agent_waits WHERE instance = $1', [I])).rows).toEqual([
      { on_what: 'live' },
    ]);
    expect((await q('SELECT goal_id FROM holt.llm_plans WHERE instance = $1', [I])).rows).toEqual([
      { goal_id: 'new-goal' },
    ]);
    const left = (await q('SELECT claim_id FROM holt.agent_inbox WHERE instance = $1', [I])).rows.map(
      (r) => r.claim_id,
    );
    expect(left.sort()).toEqual(
      [claims.oldFailedUnreported.id, claims.oldPending.id, claims.newDone.id].sort(),
    );
    const ledger = await turns.ledger(I, 'W', DAY);
    expect(ledger.window).toHaveLength(1);
    expect(ledger.totalCostUsd).toBe(3);
    // Again: nothing more to do.
    expect(await pruneFinished(store.pool, I, 7 * DAY)).toEqual({
      turns: 0,
      steps: 0,
      rows: 0,
      heads: 0,
      usage: 0,
      plans: 0,
      life: 0,
      memories: 0,
    });
  });

  it("the orchestrator's retention loop prunes Postgres on the leader, every sweep; a standby does not", async () => {
    const I = 'sweeps';
    const d = new InboxDispatcher({ store, instance: I, targetOf: () => 'w', ring: () => undefined });
    const c = claimOf();
    await d.dispatch({ claim: c, role: 'W', claimType: 'claim', phase: 'parallel' });
    await store.pool.query(
      `UPDATE holt.agent_inbox SET status = 'done', updated_at = now() - interval '3 days' WHERE claim_id = $1`,
      [c.id],
    );
    await store.pool.query(
      `UPDATE holt.agent_turns SET status = 'done', ended_at = now() - interval '3 days' WHERE claim_id = $1`,
      [c.id],
    );
    const bb = Blackboard.connect(redis.url, I);
    let leader = false;
    const rows = async () =>
      (await store.pool.query('SELECT 1 FROM holt.agent_inbox WHERE claim_id = $1', [c.id])).rowCount;
    const retention = startRetention({
      bb,
      isLeader: () => leader,
      log: silentLogger(),
      days: 1,
      sweepMs: 50,
      postgres: (olderThanMs) => pruneFinished(store.pool, I, olderThanMs),
    });
    try {
      // A standby's passes do nothing: the row is still there after several of them.
      await new Promise((r) => setTimeout(r, 300)); // six sweep intervals; nothing to wait for instead
      expect(await rows()).toBe(1);
      leader = true;
      await eventually('the leader pruned the old row', async () => (await rows()) === 0);
      const report = await eventually('the report', () => readRetentionReport(bb.redis, bb.k.retention));
      expect(report.total).toMatchObject({ turns: 1, inbox_rows: 1 });
    } finally {
      retention.stop();
      await bb.close();
    }
  });
});
