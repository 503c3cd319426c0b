import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/wait.ts';
import { claimIdForArtefact } from '../blackboard/testkit.ts';
import { approve, checklistKit, claimStatuses, onGoal, produce } from './checklist.testkit.ts';
import { captureLogs, claimFor, newGoal, waitClaim } from './testkit.ts';

// Holt's checklist, one test per row of docs/protocol.md § The protocol table, against a real Redis.
const { world } = checklistKit();

describe('Holt checklist: claims, bids and phases (rows 1–12)', () => {
  it('docs/protocol.md row 1: namespaced keys and channels per instance', async () => {
    const a = await world([{ role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') }]);
    const b = await world([{ role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') }]);
    const g = newGoal();
    await a.bb.createArtefact(g);
    await waitClaim(a.bb, (await claimFor(a.bb, g.id)).id, (c) => c.status === 'complete', 'complete in a');
    expect(await claimIdForArtefact(b.bb, g.id)).toBeNull();
    expect(await b.bb.listClaimIds()).toEqual([]);
    expect(b.rec.messages).toEqual([]);
    expect(b.agents.Coder?.grants).toEqual([]);
    const keysOfB = await b.bb.redis.keys(`holt:${b.instance}:*`);
    expect(keysOfB.every((k) => !k.includes(g.id))).toBe(true);
  });

  it('docs/protocol.md row 2: artefact schema and validation', async () => {
    const { bb } = await world([]);
    await expect(bb.createArtefact({ ...newGoal(), id: 'nope' })).rejects.toThrow(/UUID/);
    await expect(bb.createArtefact({ ...newGoal(), type: '' })).rejects.toThrow(/type/);
    await expect(bb.createArtefact({ ...newGoal(), produced_by_role: '' })).rejects.toThrow();
    await expect(
      bb.createArtefact({ ...newGoal(), structural_type: 'Bogus' as 'Standard' }),
    ).rejects.toThrow();
    const { created_at_ms: _, ...noTime } = newGoal();
    const before = Date.now();
    const { artefact } = await bb.createArtefact(noTime);
    expect(artefact.created_at_ms).toBeGreaterThanOrEqual(before);
    expect(Object.keys(await bb.redis.hgetall(bb.k.artefact(artefact.id))).sort()).toEqual(
      [
        'id',
        'logical_id',
        'version',
        'structural_type',
        'type',
        'payload',
        'source_artefacts',
        'produced_by_role',
        'created_at_ms',
      ].sort(),
    );
  });

  it('docs/protocol.md row 3: write-once artefacts + artefact event', async () => {
    const { bb, rec } = await world([]);
    const g = newGoal();
    expect((await bb.createArtefact(g)).created).toBe(true);
    expect((await bb.createArtefact({ ...g, payload: 'other' })).created).toBe(false);
    await eventually('artefact event', () => rec.messages.some((m) => m.channel === 'artefact_events'));
    expect(rec.messages.filter((m) => m.channel === 'artefact_events').map((m) => m.msg)).toEqual([g]);
    expect((await bb.getArtefact(g.id))?.payload).toBe('build it');
  });

  it('docs/protocol.md row 4: thread ZSET / latest version', async () => {
    const { bb } = await world([]);
    const v1 = { ...newGoal(), type: 'Draft' };
    const v1w = { ...v1, logical_id: v1.id };
    await bb.createArtefact(v1w);
    const v2 = { ...v1w, id: randomUUID(), version: 2, source_artefacts: [v1w.id] };
    await bb.createArtefact(v2);
    expect((await bb.latestInThreads([v1w.id])).get(v1w.id)).toEqual({ id: v2.id, version: 2 });
  });

  it('docs/protocol.md row 5: claim per claimable artefact', async () => {
    const { bb } = await world([], {}, ['Silent']);
    const claimable = ['Standard', 'Question', 'Answer'] as const;
    const skipped = ['Review', 'Failure', 'Terminal'] as const;
    const made = [...claimable, ...skipped].map((st) => newGoal('x', { structural_type: st }));
    for (const a of made) await bb.createArtefact(a);
    for (const a of made.slice(0, 3)) expect((await claimFor(bb, a.id)).status).toBe('pending_review');
    // A later artefact proves the orchestrator has handled the earlier ones (events are in order).
    const marker = newGoal();
    await bb.createArtefact(marker);
    await claimFor(bb, marker.id);
    for (const a of made.slice(3)) expect(await claimIdForArtefact(bb, a.id)).toBeNull();
    expect(await bb.listClaimIds()).toHaveLength(4);
  });

  it('docs/protocol.md row 6: idempotent claim creation', async () => {
    const { bb } = await world([], {}, ['Silent']);
    const g = newGoal();
    await bb.createArtefact(g);
    const first = await claimFor(bb, g.id);
    // The same artefact event again (a replay, or a second publisher).
    await bb.redis.publish(bb.k.channels.artefactEvents, JSON.stringify(g));
    const marker = newGoal();
    await bb.createArtefact(marker);
    await claimFor(bb, marker.id);
    expect(await claimIdForArtefact(bb, g.id)).toBe(first.id);
    expect(await bb.listClaimIds()).toHaveLength(2);
  });

  it('docs/protocol.md row 7: every agent bids on every claim', async () => {
    const roles = ['A', 'B', 'C'];
    const { bb, rec } = await world(roles.map((role) => ({ role, bid: () => 'ignore' })));
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await claimFor(bb, g.id);
    await waitClaim(bb, c.id, (x) => x.dormant_reason !== undefined, 'consensus');
    expect(await bb.getBids(c.id)).toEqual({ A: 'ignore', B: 'ignore', C: 'ignore' });
    expect(
      rec
        .events('bid_submitted')
        .filter((d) => d.claim_id === c.id)
        .map((d) => d.agent_name)
        .sort(),
    ).toEqual(roles);
  });

  it('docs/protocol.md row 8: full consensus before granting', async () => {
    const logs = captureLogs();
    const { bb, agents } = await world(
      [{ role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') }],
      { bidTimeoutMs: 60_000 },
      ['Late'],
      { logger: logs.logger },
    );
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await claimFor(bb, g.id);
    // The orchestrator has decided with the first bid in and one role missing: it chose to wait.
    await eventually('a decision that saw the first bid', () =>
      logs.lines.some(
        (l) =>
          l.event_type === 'bid_received' &&
          l.claim_id === c.id &&
          JSON.stringify(l.waiting_for) === '["Late"]',
      ),
    );
    const pending = (await bb.getClaim(c.id))?.claim;
    expect(pending?.phase_state ?? null).toBeNull();
    expect(pending?.granted_exclusive_agent).toBe('');
    expect(agents.Coder?.grants).toEqual([]);
    await bb.setBid(c.id, 'Late', 'ignore');
    await waitClaim(bb, c.id, (x) => x.status === 'complete', 'complete after the last bid');
  });

  it('docs/protocol.md row 9: invalid bid => ignore', async () => {
    const { bb } = await world([
      { role: 'Weird', bid: () => 'foobar', respond: produce('X') },
      { role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') },
    ]);
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    expect(c.phase_state?.all_bids).toEqual({ Weird: 'ignore', Coder: 'exclusive' });
    expect(c.granted_exclusive_agent).toBe('Coder');
  });

  it('docs/protocol.md row 10: exclusive tie-break', async () => {
    const roles = ['b', 'a', 'B', 'Ab'];
    const { bb } = await world(
      roles.map((role) => ({ role, bid: onGoal('exclusive'), respond: produce('Code') })),
    );
    for (let run = 0; run < 3; run++) {
      const g = newGoal();
      await bb.createArtefact(g);
      const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
      // Byte order: uppercase before lowercase.
      expect(c.granted_exclusive_agent).toBe('Ab');
    }
  });

  it('docs/protocol.md row 11: phase ordering + skipping', async () => {
    const { bb, rec } = await world([
      { role: 'Reviewer', bid: onGoal('review'), respond: approve },
      { role: 'ParallelWorker', bid: onGoal('claim'), respond: produce('ParallelWorkComplete') },
      { role: 'Coder', bid: onGoal('exclusive'), respond: produce('CodeCommit') },
    ]);
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    expect(c.granted_review_agents).toEqual(['Reviewer']);
    expect(c.granted_parallel_agents).toEqual(['ParallelWorker']);
    expect(c.granted_exclusive_agent).toBe('Coder');
    const statuses = await claimStatuses(rec, c.id);
    expect([...new Set(statuses)]).toEqual([
      'pending_review',
      'pending_parallel',
      'pending_exclusive',
      'complete',
    ]);
    const grantOrder = rec.events('claim_granted').filter((d) => d.claim_id === c.id);
    expect(grantOrder.map((d) => d.grant_type)).toEqual(['review', 'claim', 'exclusive']);

    // Skipping: an exclusive-only clan goes straight to pending_exclusive.
    const only = await world([
      { role: 'GitAgent', bid: onGoal('exclusive'), respond: produce('CodeCommit') },
    ]);
    const g2 = newGoal();
    await only.bb.createArtefact(g2);
    const c2 = await waitClaim(only.bb, (await claimFor(only.bb, g2.id)).id, (x) => x.status === 'complete');
    const s2 = await claimStatuses(only.rec, c2.id);
    expect([...new Set(s2)]).toEqual(['pending_review', 'pending_exclusive', 'complete']);
  });

  it('docs/protocol.md row 12: dormant claims', async () => {
    const { bb, agents } = await world([{ role: 'Idle', bid: () => 'ignore', respond: produce('X') }]);
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.dormant_reason !== undefined);
    expect(c.status).toBe('pending_review');
    expect(c.dormant_reason).toBe('no_bids_in_any_phase');
    expect(c.granted_exclusive_agent).toBe('');
    expect(agents.Idle?.grants).toEqual([]);
    // Not terminated, but out of the active set the pups re-read: nothing is left to bid or execute.
    expect(await bb.activeClaimIds()).not.toContain(c.id);
    expect(await bb.dormantClaimIds()).toEqual([c.id]);
    expect(await bb.listClaimIds()).toContain(c.id);
  });
});
