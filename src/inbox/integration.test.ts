import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { setAgents } from '../blackboard/registry.ts';
import type { Artefact } from '../blackboard/types.ts';
import { silentLogger } from '../common/logger.ts';
import { type OrchestratorInbox, startOrchestratorInbox } from '../orchestrator/inbox.ts';
import type { Orchestrator } from '../orchestrator/orchestrator.ts';
import { claimFor, newGoal, recordChannels, startOrchestrator, waitClaim } from '../orchestrator/testkit.ts';
import { loadWorkerEnv } from '../pup/inbox-worker.ts';
import { Pup } from '../pup/pup.ts';
import { AGENTS, config } from '../pup/testkit.ts';

// Phase 2: the orchestrator, controller pups (bidding) and inbox workers (executing), end to end.
let pg: PostgresServer;
let nats: NatsServer;
let redis: RedisServer;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [pg, nats, redis] = await Promise.all([startPostgres(), startNats(), startRedis()]);
});
afterAll(async () => {
  for (const s of stops.splice(0).reverse()) await s().catch(() => undefined);
  await Promise.all([pg?.stop(), nats?.stop(), redis?.stop()]);
});

const bid = (types: string, b: string) =>
  JSON.stringify([process.execPath, join(AGENTS, 'bid-types.mjs'), types, b]);
const tool = (path: string) => JSON.stringify([process.execPath, path]);

describe('scalable roles run on inbox workers', () => {
  it('grants, review grants and rework grants of scalable roles are executed by workers', async () => {
    const instance = `i${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    stops.push(() => bb.close());
    await setAgents(bb, [
      { role: 'Writer', kind: 'scalable', worker_target: 'writer', max_concurrent: 2 },
      { role: 'Reviewer', kind: 'scalable', worker_target: 'reviewer', max_concurrent: 1 },
    ]);
    const workspace = mkdtempSync(join(tmpdir(), 'holt-inbox-'));
    const conn = {
      REDIS_URL: redis.url,
      DATABASE_URL: pg.url,
      NATS_URL: nats.url,
      HOLT_INSTANCE_NAME: instance,
    };
    let orch: Orchestrator | undefined;
    const inbox = (await startOrchestratorInbox({
      instance,
      env: { ...conn, HOLT_INBOX_WATCHDOG_MS: '200' },
      bb,
      isLeader: () => orch?.isLeader() ?? false,
      log: silentLogger(),
    })) as OrchestratorInbox;
    stops.push(() => inbox.close());
    // Controllers bid, workers execute (two for Writer).
    const roles = {
      Writer: {
        bid: bid('GoalDefined', 'exclusive'),
        tool: tool(join(import.meta.dirname, 'fixtures', 'writer.mjs')),
        workers: 2,
      },
      Reviewer: { bid: bid('Draft', 'review'), tool: tool(join(AGENTS, 'reviewer.mjs')), workers: 1 },
    };
    for (const [role, r] of Object.entries(roles)) {
      const base = { ...conn, HOLT_AGENT_NAME: role, HOLT_AGENT_COMMAND: r.tool, HOLT_WORKSPACE: workspace };
      const controller = new Pup(
        config({ ...base, HOLT_MODE: 'controller', HOLT_BIDDING_STRATEGY: '', HOLT_AGENT_BID_SCRIPT: r.bid }),
      );
      await controller.start();
      stops.push(() => controller.stop(0));
      for (let i = 0; i < r.workers; i++) {
        const env = { ...base, HOLT_MODE: 'worker', HOLT_BIDDING_STRATEGY: '' };
        const worker = new Pup(config(env));
        await worker.startInbox(loadWorkerEnv(env));
        stops.push(() => worker.stop(0));
      }
    }
    const rec = await recordChannels(redis.url, instance);
    stops.push(async () => rec.close());
    orch = startOrchestrator(redis.url, instance, {}, { scalableDispatcher: inbox.dispatcher });
    const o = orch;
    stops.push(() => o.stop());
    await orch.whenLeader();

    const g = newGoal();
    await bb.createArtefact(g);
    const goalClaim = await waitClaim(
      bb,
      (await claimFor(bb, g.id)).id,
      (c) => c.status === 'complete',
      'goal done',
    );
    const v1 = (await bb.getArtefact(goalClaim.phase_state?.received.Writer as string)) as Artefact;
    expect(v1.payload).toBe('first draft, reject me');
    // Review of v1 (on a Reviewer worker) rejects it: a feedback claim for the Writer, reworked on a worker.
    const fb = await eventually('feedback claim', () => rec.events('feedback_claim_created')[0]);
    await waitClaim(bb, fb.feedback_claim_id as string, (c) => c.status === 'complete', 'rework done');
    const v2 = await eventually('v2', async () => {
      const l = (await bb.latestInThreads([v1.logical_id])).get(v1.logical_id);
      return l && l.version === 2 ? bb.getArtefact(l.id) : null;
    });
    expect(v2).toMatchObject({ payload: 'fixed draft', type: 'Draft', produced_by_role: 'Writer' });
    const v2Claim = await waitClaim(
      bb,
      (await claimFor(bb, v2.id)).id,
      (c) => c.dormant_reason !== undefined,
      'v2 reviewed',
    );

    // Every one of those grants went through an inbox row, done by a worker on its first attempt. (A
    // worker commits its row just after publishing the output: the claim may move first.)
    const rows = await eventually('every row settled', async () => {
      const r = await inbox.store!.pool.query<{
        claim_id: string;
        role: string;
        phase: string;
        status: string;
        attempts: number;
      }>(
        'SELECT claim_id, role, phase, status, attempts FROM holt.agent_inbox WHERE instance = $1 ORDER BY id',
        [instance],
      );
      return r.rows.every((x) => x.status !== 'claimed') ? r : null;
    });
    expect(rows.rows).toEqual([
      { claim_id: goalClaim.id, role: 'Writer', phase: 'exclusive', status: 'done', attempts: 1 },
      { claim_id: expect.any(String), role: 'Reviewer', phase: 'review', status: 'done', attempts: 1 },
      { claim_id: fb.feedback_claim_id, role: 'Writer', phase: 'exclusive', status: 'done', attempts: 1 },
      { claim_id: v2Claim.id, role: 'Reviewer', phase: 'review', status: 'done', attempts: 1 },
    ]);
    // (the index of v1 now names the feedback claim: read the review claim from its row)
    const v1Review = await bb.getClaim(rows.rows[1]!.claim_id);
    expect(v1Review?.claim).toMatchObject({ artefact_id: v1.id, granted_review_agents: ['Reviewer'] });
    // (events arrive over pub/sub, after the writes the waits above saw)
    const approved = await eventually('the approval of v2', () =>
      rec.events('review_approved').find((e) => e.original_artefact_id === v2.id),
    );
    expect(approved).toEqual({ original_artefact_id: v2.id, reviewer_role: 'Reviewer' });
  });
});
