import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { artefactArrived } from './claim-engine.ts';
import { Blackboard } from './client.ts';
import { deleteWorkflow, pruneBlackboard, readWorkflow, workflowVerdict } from './retention.ts';
import { claim, claimIdForArtefact, artefact as testArtefact, updateClaim } from './testkit.ts';
import type { Artefact, StructuralType } from './types.ts';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 10, 25);
const OLD = NOW - 10 * DAY;

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** A goal (no sources) or a coder's output made of `sources`, at `at`. */
function artefact(sources: Artefact[], at: number, st: StructuralType = 'Standard'): Artefact {
  return testArtefact({
    structural_type: st,
    type: sources.length ? 'Output' : 'GoalDefined',
    payload: 'x',
    source_artefacts: sources.map((s) => s.id),
    produced_by_role: sources.length ? 'coder' : 'user',
    created_at_ms: at,
  });
}

/** Writes an artefact as a pup would and, when it takes one, its claim as the orchestrator would. */
async function put(bb: Blackboard, a: Artefact, end: 'complete' | 'dormant' | 'open' = 'complete') {
  await bb.createArtefact(a);
  if (a.structural_type !== 'Standard') return null;
  const c = claim(a.id);
  await artefactArrived(bb, a, c);
  const vc = await bb.getClaim(c.id);
  if (!vc) throw new Error('claim not written');
  if (end === 'complete') await updateClaim(bb, { ...vc.claim, status: 'complete' }, vc.rev);
  if (end === 'dormant')
    await updateClaim(bb, { ...vc.claim, dormant_reason: 'no_bids_in_any_phase' }, vc.rev);
  return c;
}

/** goal → output → Terminal, all finished, at `at`. */
async function finishedWorkflow(bb: Blackboard, at: number) {
  const g = artefact([], at);
  await put(bb, g);
  const o = artefact([g], at + 1);
  await put(bb, o, 'dormant');
  const t = artefact([o], at + 2, 'Terminal');
  await put(bb, t);
  return [g, o, t];
}

const keysOf = async (bb: Blackboard) => (await bb.redis.keys(`${bb.k.prefix}*`)).sort();

describe('blackboard retention (real Redis)', () => {
  it('removes an old finished workflow whole: artefacts, claims, bids, threads and index entries', async () => {
    const bb = Blackboard.connect(redis.url, `ret-${randomUUID().slice(0, 8)}`);
    try {
      const before = await keysOf(bb);
      const [g] = await finishedWorkflow(bb, OLD);
      const claim = await claimIdForArtefact(bb, g!.id);
      await bb.setBid(claim!, 'coder', 'claim');
      const r = await pruneBlackboard(bb, { olderThanMs: 7 * DAY, now: NOW });
      expect(r).toMatchObject({ workflows: 1, artefacts: 3, claims: 2 });
      // Nothing of it is left but the (now empty-set-free) indexes: every per-item key is gone.
      expect(await keysOf(bb)).toEqual(before);
      expect(await bb.redis.zcard(bb.k.artefactIndex)).toBe(0);
      expect(await bb.redis.zcard(bb.k.claimIndex)).toBe(0);
      expect(await bb.redis.scard(bb.k.dormantClaims)).toBe(0);
    } finally {
      await bb.close();
    }
  });

  it('keeps recent, unfinished and linked workflows, and says why', async () => {
    const bb = Blackboard.connect(redis.url, `ret-${randomUUID().slice(0, 8)}`);
    try {
      await finishedWorkflow(bb, NOW - DAY); // recent
      const open = artefact([], OLD);
      await put(bb, open, 'open'); // old, but its claim still wants bids
      const [old] = await finishedWorkflow(bb, OLD);
      const late = artefact([old!], NOW - 60_000); // a new artefact citing the old workflow links it
      await put(bb, late);
      const gone = await finishedWorkflow(bb, OLD - DAY);
      const r = await pruneBlackboard(bb, { olderThanMs: 7 * DAY, now: NOW });
      expect(r.workflows).toBe(1);
      expect(r.kept).toMatchObject({ unfinished: 1, recent: 1 });
      expect(await bb.artefactsExist(gone.map((a) => a.id))).toEqual([false, false, false]);
      expect(await bb.artefactsExist([open.id, old!.id, late.id])).toEqual([true, true, true]);
      // Once the open claim finishes, the next pass takes it.
      const cid = await claimIdForArtefact(bb, open.id);
      const vc = await bb.getClaim(cid!);
      await updateClaim(bb, { ...vc!.claim, status: 'terminated' }, vc!.rev);
      expect((await pruneBlackboard(bb, { olderThanMs: 7 * DAY, now: NOW })).workflows).toBe(1);
      expect(await bb.artefactsExist([open.id])).toEqual([false]);
    } finally {
      await bb.close();
    }
  });

  it('keeps a workflow with an unreadable artefact (never throws) and one whose artefact has no claim yet', async () => {
    const bb = Blackboard.connect(redis.url, `ret-${randomUUID().slice(0, 8)}`);
    try {
      const [g] = await finishedWorkflow(bb, OLD);
      const bad = randomUUID();
      await bb.redis.hset(bb.k.artefact(bad), { id: bad, created_at_ms: 'yesterday', source_artefacts: '[' });
      await bb.redis.sadd(bb.k.children(g!.id), bad);
      const unseen = artefact([], OLD);
      await bb.createArtefact(unseen); // the orchestrator has not opened its claim
      const r = await pruneBlackboard(bb, { olderThanMs: 7 * DAY, now: NOW });
      expect(r).toMatchObject({ workflows: 0, kept: { unreadable: 1, unfinished: 1 } });
      expect(await bb.artefactsExist([g!.id, unseen.id])).toEqual([true, true]);
    } finally {
      await bb.close();
    }
  });

  it('refuses a delete when the workflow changed between the read and the delete (a new child)', async () => {
    const bb = Blackboard.connect(redis.url, `ret-${randomUUID().slice(0, 8)}`);
    try {
      const [, o] = await finishedWorkflow(bb, OLD);
      const snap = await readWorkflow(bb, o!.id, 100);
      expect(workflowVerdict(snap, NOW - 7 * DAY)).toEqual({ prune: true });
      await put(bb, artefact([o!], NOW)); // arrives after the read
      expect(await deleteWorkflow(bb, snap)).toBeNull();
      expect(await bb.artefactsExist([o!.id])).toEqual([true]);
    } finally {
      await bb.close();
    }
  });

  it("removes a finished claim whose artefact is gone (a feedback claim's predecessor); keeps an active one", async () => {
    const bb = Blackboard.connect(redis.url, `ret-${randomUUID().slice(0, 8)}`);
    try {
      const lost = claim(artefact([], OLD).id);
      await bb.createClaim(lost);
      const vc = await bb.getClaim(lost.id);
      await updateClaim(bb, { ...vc!.claim, status: 'terminated' }, vc!.rev);
      const live = claim(artefact([], OLD).id);
      await bb.createClaim(live); // active: the orchestrator still works on it (data loss, R4)
      await bb.redis.zadd(bb.k.claimIndex, OLD, lost.id, OLD, live.id);
      const r = await pruneBlackboard(bb, { olderThanMs: 7 * DAY, now: NOW });
      expect(r.claims).toBe(1);
      expect(await bb.getClaim(lost.id)).toBeNull();
      expect(await bb.getClaim(live.id)).not.toBeNull();
    } finally {
      await bb.close();
    }
  });

  it('works through a large backlog in bounded passes, resuming where the last one stopped', async () => {
    const bb = Blackboard.connect(redis.url, `ret-${randomUUID().slice(0, 8)}`);
    try {
      // Kept workflows first in the index, so a pass that always restarted at 0 would never get past them.
      for (let i = 0; i < 6; i++) await put(bb, artefact([], OLD - 2 * DAY + i), 'open');
      for (let i = 0; i < 20; i++) await finishedWorkflow(bb, OLD + i * 10);
      let offset = 0;
      let workflows = 0;
      let passes = 0;
      while (workflows < 20 && passes < 20) {
        const r = await pruneBlackboard(bb, {
          olderThanMs: 7 * DAY,
          now: NOW,
          offset,
          maxArtefacts: 12,
          page: 4,
        });
        workflows += r.workflows;
        offset = r.nextOffset;
        passes++;
      }
      expect(workflows).toBe(20);
      expect(passes).toBeGreaterThan(1);
      expect(await bb.redis.zcard(bb.k.artefactIndex)).toBe(6);
    } finally {
      await bb.close();
    }
  });
});
