import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/wait.ts';
import { childrenOf } from '../blackboard/claim-engine.ts';
import { readQuarantine } from '../blackboard/quarantine.ts';
import { claimIdForArtefact } from '../blackboard/testkit.ts';
import { type Artefact, WorkflowEvent } from '../blackboard/types.ts';
import { approve, checklistKit, isGoal, onGoal, produce } from './checklist.testkit.ts';
import { claimFor, newGoal, waitClaim } from './testkit.ts';

// Holt's checklist, one test per row of docs/protocol.md § The protocol table, against a real Redis.
const { world } = checklistKit();

describe('Holt checklist: reviews, rework, failures and events (rows 14–49)', () => {
  it('docs/protocol.md row 14: single veto + all feedback consolidated', async () => {
    const draft = (a: Artefact) => a.type === 'Draft';
    const { bb } = await world([
      { role: 'Writer', bid: (a) => (isGoal(a) ? 'exclusive' : 'ignore'), respond: produce('Draft') },
      {
        role: 'R1',
        bid: (a) => (draft(a) ? 'review' : 'ignore'),
        respond: () => ({ type: 'Review', payload: 'needs tests' }),
      },
      { role: 'R2', bid: (a) => (draft(a) ? 'review' : 'ignore'), respond: approve },
      {
        role: 'R3',
        bid: (a) => (draft(a) ? 'review' : 'ignore'),
        respond: () => ({ type: 'Review', payload: '{"x":1}' }),
      },
    ]);
    // Writer answers the rework by failing, so the loop ends there.
    const g = newGoal();
    await bb.createArtefact(g);
    const goalClaim = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    const draftId = goalClaim.phase_state?.received.Writer as string;
    const draftClaimId = (await eventually('the draft claim terminated', async () => {
      const ids = await bb.listClaimIds();
      for (const id of ids) {
        const vc = await bb.getClaim(id);
        if (vc?.claim.artefact_id === draftId && vc.claim.status === 'terminated') return id;
      }
      return null;
    })) as string;
    const terminated = (await bb.getClaim(draftClaimId))?.claim;
    const received = terminated?.phase_state?.received ?? {};
    const rejecting = [received.R1, received.R3].sort();
    const fbId = await claimIdForArtefact(bb, draftId);
    const fb = (await bb.getClaim(fbId as string))?.claim;
    expect(fb?.status === 'pending_assignment' || fb?.status === 'complete').toBe(true);
    expect(fb?.granted_exclusive_agent).toBe('Writer');
    expect([...(fb?.additional_context_ids ?? [])].sort()).toEqual(rejecting);
    expect(terminated?.termination_reason).toMatch(
      /^Terminated due to negative review feedback\. See artefacts: \[/,
    );
    for (const id of rejecting) expect(terminated?.termination_reason).toContain(id as string);
    // Reviews on a feedback claim's target (the approving one too) are not foreign outputs.
    expect(await readQuarantine(bb)).toEqual([]);
  });

  it('docs/protocol.md row 15: parallel phase waits for all', async () => {
    const { bb, agents } = await world([
      { role: 'P1', bid: onGoal('claim'), respond: produce('Part1') },
      { role: 'P2', bid: onGoal('claim'), respond: produce('Part2') },
      { role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') },
    ]);
    agents.P2?.pause();
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await claimFor(bb, g.id);
    await waitClaim(bb, c.id, (x) => x.phase_state?.received.P1 !== undefined, 'P1 output received');
    const mid = (await bb.getClaim(c.id))?.claim;
    expect(mid?.status).toBe('pending_parallel');
    expect(mid?.granted_exclusive_agent).toBe('');
    expect(agents.Coder?.grants).toEqual([]);
    await agents.P2?.release();
    const done = await waitClaim(bb, c.id, (x) => x.status === 'complete');
    expect(done.granted_exclusive_agent).toBe('Coder');
  });

  it('docs/protocol.md row 16: exclusive completion', async () => {
    const { bb, agents } = await world([
      { role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') },
    ]);
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    expect(c.phase_state?.received).toEqual({ Coder: agents.Coder?.outputs[0]?.id });
    expect(await bb.activeClaimIds()).not.toContain(c.id);
  });

  it('docs/protocol.md row 17: grant notification', async () => {
    const { bb, rec, agents } = await world(
      [{ role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') }],
      {},
      [{ role: 'Coder', kind: 'standard', image_id: 'sha256:abc' }],
    );
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    const notes = rec.messages.filter((m) => m.channel === 'agent:Coder:events').map((m) => m.msg);
    expect(notes).toEqual([{ event_type: 'grant', claim_id: c.id, claim_type: 'exclusive' }]);
    expect(rec.events('claim_granted')).toEqual([
      { claim_id: c.id, agent_name: 'Coder', grant_type: 'exclusive', agent_image_id: 'sha256:abc' },
    ]);
    // The grant is on the claim before the notification goes out (the pup checks it).
    expect(agents.Coder?.executed.has(c.id)).toBe(true);
  });

  it('docs/protocol.md row 23: Failure/Terminal close their claim', async () => {
    const { bb } = await world([
      {
        role: 'Coder',
        bid: onGoal('exclusive'),
        respond: ({ target }) =>
          target.payload === 'fail'
            ? { structural_type: 'Failure', type: 'ToolExecutionFailure', payload: '{"reason":"boom"}' }
            : { structural_type: 'Terminal', type: 'Done', payload: 'ok' },
      },
    ]);
    const bad = newGoal('fail');
    const good = newGoal('finish');
    await bb.createArtefact(bad);
    await bb.createArtefact(good);
    const t = await waitClaim(bb, (await claimFor(bb, bad.id)).id, (x) => x.status === 'terminated');
    expect(t.termination_reason).toMatch(/Failure from agent 'Coder' \(ToolExecutionFailure .*boom/);
    const c = await waitClaim(bb, (await claimFor(bb, good.id)).id, (x) => x.status === 'complete');
    expect(c.status).toBe('complete');
  });

  it('docs/protocol.md row 25: feedback loop', async () => {
    const { bb, rec } = await world([
      { role: 'Writer', bid: (a) => (isGoal(a) ? 'exclusive' : 'ignore'), respond: produce('Draft') },
      {
        role: 'Reviewer',
        bid: (a) => (a.type === 'Draft' ? 'review' : 'ignore'),
        respond: ({ target }) => ({ type: 'Review', payload: target.version === 1 ? 'needs tests' : '{}' }),
      },
    ]);
    const g = newGoal();
    await bb.createArtefact(g);
    const goalClaim = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    const v1Id = goalClaim.phase_state?.received.Writer as string;
    const v1 = (await bb.getArtefact(v1Id)) as Artefact;
    const fbEvent = await eventually('feedback_claim_created', () => rec.events('feedback_claim_created')[0]);
    expect(fbEvent.target_agent_role).toBe('Writer');
    expect(fbEvent.iteration).toBe(1);
    const fb = await waitClaim(
      bb,
      fbEvent.feedback_claim_id as string,
      (x) => x.status === 'complete',
      'rework done',
    );
    expect(fb.status).toBe('complete');
    const latest = await eventually('v2', async () => {
      const l = (await bb.latestInThreads([v1.logical_id])).get(v1.logical_id);
      return l && l.version === 2 ? l : null;
    });
    const v2 = (await bb.getArtefact(latest.id)) as Artefact;
    expect(v2).toMatchObject({ logical_id: v1.logical_id, type: 'Draft', produced_by_role: 'Writer' });
    expect(v2.source_artefacts[0]).toBe(v1.id);
    expect(v2.source_artefacts.slice(1)).toEqual(fb.additional_context_ids);
    // The rework gets a brand-new claim, which is reviewed again and approved.
    const c2 = await waitClaim(bb, (await claimFor(bb, v2.id)).id, (x) => x.dormant_reason !== undefined);
    expect(c2.granted_review_agents).toEqual(['Reviewer']);
    expect(c2.dormant_reason).toBe('no_grants_remaining_after_review');
    // Events arrive over pub/sub, after the claim write the wait above saw.
    const approved = await eventually('the approval of v2', () =>
      rec.events('review_approved').find((e) => e.original_artefact_id === v2.id),
    );
    expect(approved).toEqual({ original_artefact_id: v2.id, reviewer_role: 'Reviewer' });
    expect(await readQuarantine(bb)).toEqual([]);
  });

  it('docs/protocol.md row 26: max iterations', async () => {
    const { bb } = await world(
      [
        { role: 'Writer', bid: (a) => (isGoal(a) ? 'exclusive' : 'ignore'), respond: produce('Draft') },
        {
          role: 'Reviewer',
          bid: (a) => (a.type === 'Draft' ? 'review' : 'ignore'),
          respond: () => ({ type: 'Review', payload: 'no' }),
        },
      ],
      { maxReviewIterations: 2 },
    );
    await bb.createArtefact(newGoal());
    const failure = await eventually('MaxIterationsExceeded', async () => {
      for (const id of await bb.listArtefactIds()) {
        const a = await bb.getArtefact(id);
        if (a?.type === 'MaxIterationsExceeded') return a;
      }
      return null;
    });
    expect(failure.structural_type).toBe('Failure');
    expect(failure.produced_by_role).toBe('orchestrator');
    const v3 = (await bb.getArtefact(failure.source_artefacts[0] as string)) as Artefact;
    expect(v3.version).toBe(3);
    expect(failure.payload).toBe(
      `Max review iterations (2) reached for artefact ${v3.id} (version 3). Review feedback loop terminated.`,
    );
    const claims = (await bb.getClaims(await bb.listClaimIds())).map((x) => x?.claim);
    const last = claims.find((c) => c?.artefact_id === v3.id && c.status === 'terminated');
    // The reason the loop stopped is kept (Holt overwrote it with the review text).
    expect(last?.termination_reason).toBe('Terminated after reaching max review iterations (2).');
    expect(claims.filter((c) => c?.status === 'pending_assignment')).toEqual([]);
  });

  it('docs/protocol.md row 27: missing producer', async () => {
    const { bb } = await world([
      { role: 'Reviewer', bid: onGoal('review'), respond: () => ({ type: 'Review', payload: 'bad goal' }) },
    ]);
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'terminated');
    expect(c.termination_reason).toBe(
      "Cannot create feedback claim: agent with role 'user' no longer exists in configuration.",
    );
    const kids = await bb.getArtefacts(await childrenOf(bb, g.id));
    const failure = kids.find((a) => a?.type === 'MissingAgentConfiguration');
    expect(failure?.structural_type).toBe('Failure');
    expect(failure?.produced_by_role).toBe('orchestrator');
  });

  it('docs/protocol.md row 34: phase state persistence', async () => {
    const { bb, agents } = await world([
      { role: 'P1', bid: onGoal('claim'), respond: produce('Part1') },
      { role: 'P2', bid: onGoal('claim'), respond: produce('Part2') },
    ]);
    agents.P2?.pause();
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await claimFor(bb, g.id);
    const mid = await waitClaim(bb, c.id, (x) => x.phase_state?.received.P1 !== undefined);
    // `received` is written on every receipt, not only at the grant.
    const raw = JSON.parse((await bb.redis.hget(bb.k.claim(c.id), 'phase_state')) as string);
    expect(raw).toEqual({
      current: 'parallel',
      granted_agents: ['P1', 'P2'],
      received: { P1: agents.P1?.outputs[0]?.id },
      all_bids: { P1: 'claim', P2: 'claim' },
      start_time_ms: mid.phase_state?.start_time_ms,
    });
    await agents.P2?.release();
    await waitClaim(bb, c.id, (x) => x.dormant_reason === 'no_grants_remaining_after_parallel');
  });

  it('docs/protocol.md row 38: ms timestamps', async () => {
    const { bb } = await world([{ role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') }]);
    const before = Date.now();
    const { created_at_ms: _, ...g } = newGoal();
    const { artefact } = await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, artefact.id)).id, (x) => x.status === 'complete');
    for (const ms of [artefact.created_at_ms, c.phase_state?.start_time_ms, c.created_at_ms]) {
      expect(Number.isInteger(ms)).toBe(true);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThan(before + 10 * 60_000);
    }
  });

  it('docs/protocol.md row 41: workflow event stream', async () => {
    const { bb, rec } = await world([
      { role: 'Writer', bid: (a) => (isGoal(a) ? 'exclusive' : 'ignore'), respond: produce('Draft') },
      {
        role: 'Reviewer',
        bid: (a) => (a.type === 'Draft' ? 'review' : 'ignore'),
        respond: ({ target }) => ({ type: 'Review', payload: target.version === 1 ? 'x'.repeat(300) : '[]' }),
      },
    ]);
    await bb.createArtefact(newGoal());
    await eventually('the approval of v2', () => rec.events('review_approved').length > 0);
    const keysOf: Record<string, string[]> = {
      bid_submitted: ['agent_name', 'bid_type', 'claim_id'],
      claim_granted: ['agent_image_id', 'agent_name', 'claim_id', 'grant_type'],
      review_approved: ['original_artefact_id', 'reviewer_role'],
      review_rejected: ['feedback', 'original_artefact_id', 'reviewer_role'],
      feedback_claim_created: ['feedback_claim_id', 'iteration', 'original_claim_id', 'target_agent_role'],
      artefact_reworked: [
        'artefact_type',
        'logical_id',
        'new_version',
        'previous_version_id',
        'produced_by_role',
      ].concat('new_artefact_id'),
    };
    for (const [name, keys] of Object.entries(keysOf)) {
      const evs = rec.events(name);
      expect(evs.length, name).toBeGreaterThan(0);
      for (const d of evs) expect(Object.keys(d).sort(), name).toEqual([...keys].sort());
    }
    for (const m of rec.messages.filter((x) => x.channel === 'workflow_events')) {
      expect(WorkflowEvent.safeParse(m.msg).success).toBe(true);
    }
    expect(rec.events('review_rejected')[0]?.feedback).toBe(`${'x'.repeat(200)}...`);
  });

  it('docs/protocol.md row 49: bid timeout (a hung agent)', async () => {
    const { bb, rec } = await world(
      [
        { role: 'Coder', bid: onGoal('exclusive'), respond: produce('Code') },
        { role: 'Hung', bid: () => null },
      ],
      { bidTimeoutMs: 300 },
    );
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
    expect(c.phase_state?.all_bids).toEqual({ Coder: 'exclusive', Hung: 'ignore' });
    expect(rec.events('bid_timeout')).toEqual([{ claim_id: c.id, silent_agents: ['Hung'], timeout_ms: 300 }]);
    // Its bid turns up at last (as a pup writes one): named in a bid_late event, once, and not counted.
    const lateBid = async () => {
      await bb.redis.hset(bb.k.bids(c.id), 'Hung', 'exclusive');
      await bb.publishWorkflowEvent({
        event: 'bid_submitted',
        data: { claim_id: c.id, agent_name: 'Hung', bid_type: 'exclusive' },
      });
    };
    await lateBid();
    await lateBid();
    const late = await eventually('bid_late', () => rec.events('bid_late')[0]);
    expect(late).toMatchObject({ claim_id: c.id, agent_name: 'Hung', bid_type: 'exclusive' });
    expect(late.late_by_ms).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(rec.events('bid_late')).toHaveLength(1);
    expect((await bb.getClaim(c.id))?.claim.phase_state?.all_bids).toEqual({
      Coder: 'exclusive',
      Hung: 'ignore',
    });
    // Changed from Holt (issue 29, item 8): a late bid no longer means losing every claim. It widens
    // that bidder's own window (bid-windows.ts), so the next claim waits longer for it, within the
    // maximum (4 × the bid timeout by default). A bidder that never bids is still dropped.
    const g2 = newGoal();
    await bb.createArtefact(g2);
    const c2 = await waitClaim(bb, (await claimFor(bb, g2.id)).id, (x) => x.status === 'complete');
    expect(c2.phase_state?.all_bids).toEqual({ Coder: 'exclusive', Hung: 'ignore' });
    const timeout2 = await eventually('the second bid_timeout', () =>
      rec.events('bid_timeout').find((e) => e.claim_id === c2.id),
    );
    expect(timeout2.silent_agents).toEqual(['Hung']);
    expect(timeout2.timeout_ms).toBeGreaterThan(300);
    expect(timeout2.timeout_ms).toBeLessThanOrEqual(1200);
  });

  it('extension: an artefact by a role the claim never granted is quarantined and reported, never its output', async () => {
    const { bb, rec } = await world([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => null }, // granted, slow to deliver
      { role: 'Mallory', bid: () => 'ignore' },
    ]);
    const g = newGoal();
    await bb.createArtefact(g);
    const claim = await claimFor(bb, g.id);
    await waitClaim(bb, claim.id, (c) => c.granted_exclusive_agent === 'Coder', 'granted to Coder');
    // Mallory, never granted, writes a Terminal on the claim's target: it would end the workflow.
    const forged = newGoal('all done', {
      type: 'WorkflowComplete',
      structural_type: 'Terminal',
      source_artefacts: [g.id],
      produced_by_role: 'Mallory',
    });
    await bb.createArtefact(forged);
    await eventually('quarantined', async () => (await readQuarantine(bb)).length > 0);
    expect(await readQuarantine(bb)).toEqual([
      expect.objectContaining({
        kind: 'artefact',
        id: forged.id,
        claim_id: claim.id,
        produced_by_role: 'Mallory',
        reason: 'author_not_granted',
      }),
    ]);
    await eventually('quarantined event', async () => rec.events('quarantined').length > 0);
    expect(rec.events('quarantined')).toEqual([
      {
        kind: 'artefact',
        id: forged.id,
        claim_id: claim.id,
        produced_by_role: 'Mallory',
        reason: 'author_not_granted',
      },
    ]);
    // The grantee's real output still completes the claim; the forgery never counted.
    const real = newGoal('code', { type: 'Code', source_artefacts: [g.id], produced_by_role: 'Coder' });
    await bb.createArtefact(real);
    const done = await waitClaim(bb, claim.id, (c) => c.status === 'complete', 'complete');
    expect(done.phase_state?.received).toEqual({ Coder: real.id });
    expect(rec.events('quarantined')).toHaveLength(1);
  });
});
