import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type Monitored, monitorCommands } from '../../test/harness/redis-monitor.ts';
import { eventually } from '../../test/harness/wait.ts';

import {
  artefactIdsSince,
  childrenOf,
  claimIdsForArtefacts,
  claimRevs,
  claimSnapshots,
  grantQueues,
  indexArtefacts,
  indexMissingArtefacts,
  moveToDormant,
  removeFromGrantQueue,
  updateClaims,
} from './claim-engine.ts';
import { Blackboard } from './client.ts';
import { artefactToHash } from './codec.ts';
import { acquireExecution, releaseExecution } from './execution-lease.ts';
import { bidView, contextLevel, hasBids } from './pup-reads.ts';
import { subscribe } from './subscriber.ts';
import { artefact, claim, claimSnapshot, updateClaim, useBlackboard } from './testkit.ts';
import type { Claim } from './types.ts';

const { bb, redisUrl } = useBlackboard('test');

describe('blackboard: orchestrator support', () => {
  it('indexes the children of each source inside the artefact write', async () => {
    const g = artefact();
    await bb().createArtefact(g);
    const childId = randomUUID();
    await bb().createArtefact({
      ...artefact(),
      id: childId,
      logical_id: childId,
      source_artefacts: [g.id, g.id],
    });
    expect(await childrenOf(bb(), g.id)).toEqual([childId]);
    // An artefact written by Holt's own pup (plain HSET) joins the indexes through indexArtefacts.
    const foreign = { ...artefact(), id: randomUUID(), source_artefacts: [g.id], created_at_ms: 42 };
    await indexArtefacts(bb(), [foreign]);
    expect((await childrenOf(bb(), g.id)).sort()).toEqual([childId, foreign.id].sort());
    expect(await artefactIdsSince(bb(), 0)).toContainEqual({ id: foreign.id, ms: 42 });
    expect((await artefactIdsSince(bb(), g.created_at_ms + 1)).map((x) => x.id)).not.toContain(g.id);
  });

  it('claim extension fields round-trip and are left alone by updates', async () => {
    const c = { ...claim(artefact().id), expected_bidders: ['a', 'b'], created_at_ms: 7 };
    await bb().createClaim(c);
    const read = (await bb().getClaim(c.id))!;
    expect(read.claim.expected_bidders).toEqual(['a', 'b']);
    expect(read.claim.created_at_ms).toBe(7);
    await updateClaim(bb(), { ...read.claim, dormant_reason: 'no_bids_in_any_phase' }, read.rev);
    const after = (await bb().getClaim(c.id))!;
    expect(after.claim.dormant_reason).toBe('no_bids_in_any_phase');
    expect(await claimRevs(bb(), [c.id, randomUUID()])).toEqual([after.rev, null]);
    expect(await claimIdsForArtefacts(bb(), [c.artefact_id, randomUUID()])).toEqual([c.id, null]);
  });

  it('several compare-and-sets in one call: each is applied or refused on its own, with its announcements', async () => {
    const [a, b, c] = [claim(artefact().id), claim(artefact().id), claim(artefact().id)];
    for (const x of [a, b, c]) await bb().createClaim(x);
    const heard: string[] = [];
    const sub = await subscribe(
      redisUrl(),
      ['batch-test'],
      z.string(),
      (m) => heard.push(m),
      () => undefined,
    );
    const pub = (m: string) => ({ channel: 'batch-test', message: JSON.stringify(m) });
    const revs = await updateClaims(bb(), [
      { claim: { ...a, status: 'pending_parallel' }, rev: 1, announce: [pub('a')], previous: a },
      { claim: { ...b, status: 'pending_parallel' }, rev: 7, announce: [pub('b')] }, // stale rev
      { claim: { ...c, status: 'complete' }, rev: 1, announce: [pub('c')] },
    ]);
    expect(revs).toEqual([2, null, 2]);
    expect((await bb().getClaim(a.id))?.claim.status).toBe('pending_parallel');
    expect((await bb().getClaim(b.id))?.claim.status).toBe('pending_review');
    expect((await bb().getClaim(c.id))?.claim.status).toBe('complete');
    expect(await bb().activeClaimIds()).not.toContain(c.id);
    await eventually('the announcements', () => heard.length >= 2);
    expect(heard.sort()).toEqual(['a', 'c']);
    await sub.close();
    // Snapshots in one call match one at a time.
    const one = await claimSnapshot(bb(), a.id, { bids: true, target: true });
    const many = await claimSnapshots(bb(), [
      { id: randomUUID(), bids: true, target: true },
      { id: a.id, bids: true, target: true },
    ]);
    expect(many).toEqual([null, one]);
    // A claim that cannot be read reads as missing and is reported; one that cannot be written fails
    // alone: the others in its batch go through.
    const bad = claim(artefact().id);
    await bb().redis.set(bb().k.claim(bad.id), 'not a hash');
    const broken = claim(artefact().id);
    await bb().createClaim(broken);
    await bb().redis.hset(bb().k.claim(broken.id), 'granted_review_agents', '[');
    const reads = await claimSnapshots(bb(), [
      { id: bad.id, bids: false, target: false },
      { id: broken.id, bids: false, target: false },
      { id: a.id, bids: true, target: true },
    ]);
    expect(reads[0]).toBeNull();
    expect(reads[1]).toBeNull();
    expect(bb().malformed.get(`claim:${bad.id}`)?.reason).toMatch(/WRONGTYPE/);
    expect(bb().malformed.get(`claim:${broken.id}`)?.reason).toBe('granted_review_agents: not valid JSON');
    expect(reads[2]).toEqual(one);
    const writes = await updateClaims(bb(), [
      { claim: { ...bad, status: 'complete' }, rev: 1 },
      { claim: { ...a, status: 'pending_exclusive' }, rev: 2 },
    ]);
    expect(writes[0]).toBeInstanceOf(Error);
    expect(writes[1]).toBe(3);
    await expect(updateClaim(bb(), { ...bad, status: 'complete' }, 1)).rejects.toThrow(/WRONGTYPE/);
  });

  it('an update given the claim it replaces writes only the changed fields and reads back whole', async () => {
    const c = {
      ...claim(artefact().id),
      dormant_reason: 'no_bids_in_any_phase',
      expected_bidders: ['a'],
    };
    await bb().createClaim(c);
    const next: Claim = {
      ...c,
      dormant_reason: undefined,
      status: 'pending_exclusive',
      granted_exclusive_agent: 'a',
      last_grant_agent: 'a',
      last_grant_time: 42,
    };
    const seen: Monitored[] = [];
    const monitor = await monitorCommands(bb().redis, seen);
    const rev = await updateClaim(bb(), next, 1, [], c);
    expect(rev).toBe(2);
    const hset = await eventually('the HSET in the monitor stream', () =>
      seen.map((m) => m.args).find((a) => a[0]?.toLowerCase() === 'hset' && a[1] === bb().k.claim(c.id)),
    );
    monitor.disconnect();
    const written = hset.slice(2).filter((_, i) => i % 2 === 0);
    expect(written.sort()).toEqual(
      [
        'rev',
        'status',
        'granted_exclusive_agent',
        'last_grant_agent',
        'last_grant_time',
        'dormant_reason',
      ].sort(),
    );
    const back = (await bb().getClaim(c.id))?.claim;
    expect(back).toEqual({ ...next, dormant_reason: undefined });
    expect(back?.dormant_reason).toBeUndefined();
  });

  it('dormant claims leave the active set for the dormant set; final claims leave both', async () => {
    const c = claim(artefact().id);
    await bb().createClaim(c);
    expect(await bb().activeClaimIds()).toContain(c.id);
    const r1 = (await updateClaim(bb(), { ...c, dormant_reason: 'no_bids_in_any_phase' }, 1)) as number;
    expect(await bb().activeClaimIds()).not.toContain(c.id);
    expect(await bb().dormantClaimIds()).toContain(c.id);
    const r2 = (await updateClaim(bb(), { ...c }, r1)) as number; // not dormant any more: active again
    expect(await bb().activeClaimIds()).toContain(c.id);
    expect(await bb().dormantClaimIds()).not.toContain(c.id);
    await updateClaim(bb(), { ...c, dormant_reason: 'x' }, r2);
    await updateClaim(bb(), { ...c, dormant_reason: 'x', status: 'terminated' }, r2 + 1);
    expect(await bb().activeClaimIds()).not.toContain(c.id);
    expect(await bb().dormantClaimIds()).not.toContain(c.id);
    // Created dormant (a copy, say): straight into the dormant set.
    const d = { ...claim(artefact().id), dormant_reason: 'no_bids_in_any_phase' };
    await bb().createClaim(d);
    expect(await bb().dormantClaimIds()).toContain(d.id);
    expect(await bb().activeClaimIds()).not.toContain(d.id);
    // Claims made dormant before the set existed are moved by the orchestrator's recovery.
    const legacy = claim(artefact().id);
    await bb().createClaim(legacy);
    await moveToDormant(bb(), [legacy.id]);
    expect(await bb().dormantClaimIds()).toContain(legacy.id);
    expect(await bb().activeClaimIds()).not.toContain(legacy.id);
  });

  it('indexes artefacts written without the index (Holt tools) with one SCAN', async () => {
    const other = Blackboard.connect(redisUrl(), 'scan');
    try {
      const ours = { ...artefact(), created_at_ms: 10 };
      await other.createArtefact(ours);
      await other.redis.zadd(other.k.artefactIndex, 'XX', 11, ours.id); // an existing score is kept
      const foreign = Array.from({ length: 30 }, (_, i) => ({ ...artefact(), created_at_ms: 100 + i }));
      const child = { ...artefact(), source_artefacts: [ours.id], created_at_ms: 200 };
      for (const a of [...foreign, child]) await other.redis.hset(other.k.artefact(a.id), artefactToHash(a));
      const bad = randomUUID();
      await other.redis.hset(other.k.artefact(bad), { id: bad, version: 'x' });
      await other.redis.set(other.k.claimByArtefact(ours.id), 'not-a-hash'); // other key shapes are ignored
      const { indexed, malformed } = await indexMissingArtefacts(other, 7); // a small COUNT: many SCAN calls
      expect(indexed.map((a) => a.id).sort()).toEqual([...foreign, child].map((a) => a.id).sort());
      expect(malformed).toEqual([bad]);
      expect(await artefactIdsSince(other, 0)).toEqual([
        { id: ours.id, ms: 11 },
        ...[...foreign, child].map((a) => ({ id: a.id, ms: a.created_at_ms })),
      ]);
      expect(await childrenOf(other, ours.id)).toEqual([child.id]);
      expect((await indexMissingArtefacts(other)).indexed).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('a failed command in a pipelined read is thrown, not read as missing', async () => {
    const id = randomUUID();
    await bb().redis.set(bb().k.claim(id), 'not a hash');
    await expect(bb().getClaims([id])).rejects.toThrow(/WRONGTYPE/);
    await expect(claimRevs(bb(), [id])).rejects.toThrow(/WRONGTYPE/);
    await bb().redis.del(bb().k.claim(id));
  });

  it('lists and trims Holt grant queues', async () => {
    await bb().redis.zadd('holt:test:grant_queue:Coder', 2, 'c2', 1, 'c1');
    expect((await grantQueues(bb())).get('Coder')).toEqual(['c1', 'c2']);
    await removeFromGrantQueue(bb(), 'Coder', 'c1');
    expect((await grantQueues(bb())).get('Coder')).toEqual(['c2']);
  });
});

describe('blackboard: pup support', () => {
  it('hasBids and artefactsExist answer per id in one pipeline', async () => {
    const c1 = claim(artefact().id);
    const c2 = claim(artefact().id);
    await bb().setBid(c1.id, 'coder', 'review');
    expect(await hasBids(bb(), [c1.id, c2.id], 'coder')).toEqual([true, false]);
    const a = artefact();
    await bb().createArtefact(a);
    expect(await bb().artefactsExist([a.id, randomUUID()])).toEqual([true, false]);
  });

  it("bidView reads claim, bid and target in one round trip, and never trusts the target's hint", async () => {
    const a = artefact();
    const other = artefact();
    await bb().createArtefact(a);
    await bb().createArtefact(other);
    const c = claim(a.id);
    await bb().createClaim(c);
    const right = await bidView(bb(), c.id, 'coder', a.id);
    expect(right.claim?.claim.id).toBe(c.id);
    expect(right.hasBid).toBe(false);
    expect(right.target).toEqual(a);
    // A forged claim event naming another artefact: the stored claim wins, the target is left unread.
    const forged = await bidView(bb(), c.id, 'coder', other.id);
    expect(forged.target).toBeUndefined();
    expect((await bidView(bb(), c.id, 'coder', undefined)).target).toBeUndefined();
    await bb().setBid(c.id, 'coder', 'ignore');
    expect((await bidView(bb(), c.id, 'coder', a.id)).hasBid).toBe(true);
    expect((await bidView(bb(), randomUUID(), 'coder', a.id)).claim).toBeNull();
    // A target key of the wrong type: left to the caller, which reports it.
    const odd = claim(randomUUID());
    await bb().createClaim(odd);
    await bb().redis.set(bb().k.artefact(odd.artefact_id), 'not a hash');
    expect((await bidView(bb(), odd.id, 'coder', odd.artefact_id)).target).toBeUndefined();
  });

  it('contextLevel returns each artefact and its newer thread version in one round trip', async () => {
    const v1 = artefact();
    const v2 = { ...artefact(), logical_id: v1.logical_id, version: 2, source_artefacts: [v1.id] };
    const solo = artefact();
    for (const a of [v1, v2, solo]) await bb().createArtefact(a);
    const missing = randomUUID();
    const { found, malformed } = await contextLevel(bb(), [v1.id, solo.id, missing, v2.id]);
    expect(found).toEqual([
      { artefact: v1, latest: v2 },
      { artefact: solo, latest: null },
      { artefact: null, latest: null },
      { artefact: v2, latest: null },
    ]);
    expect(malformed).toEqual([]);
  });

  it('an execution lease is exclusive until released by its owner', async () => {
    const id = randomUUID();
    expect(await acquireExecution(bb(), id, 'a', 60_000)).toBe(true);
    expect(await acquireExecution(bb(), id, 'b', 60_000)).toBe(false);
    await releaseExecution(bb(), id, 'b');
    expect(await acquireExecution(bb(), id, 'b', 60_000)).toBe(false);
    await releaseExecution(bb(), id, 'a');
    expect(await acquireExecution(bb(), id, 'b', 60_000)).toBe(true);
  });
});
