import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isApproval } from '../blackboard/review.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { decide, pendingGrants, type Snapshot } from './decide.ts';
import { grantees, nextPhase, sanitiseBid } from './phases.ts';

const art = (over: Partial<Artefact> = {}): Artefact => {
  const id = randomUUID();
  return {
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Standard',
    type: 'Draft',
    payload: '',
    source_artefacts: [],
    produced_by_role: 'Writer',
    created_at_ms: 1,
    ...over,
  };
};

function reviewed(version: number, max: number, producer = 'Writer') {
  const target = art({ version, produced_by_role: producer });
  const review = art({
    structural_type: 'Review',
    type: 'Review',
    payload: 'no',
    produced_by_role: 'R',
    source_artefacts: [target.id],
  });
  const claim: Claim = {
    id: randomUUID(),
    artefact_id: target.id,
    status: 'pending_review',
    granted_review_agents: ['R'],
    granted_parallel_agents: [],
    granted_exclusive_agent: '',
    phase_state: {
      current: 'review',
      granted_agents: ['R'],
      received: {},
      all_bids: { R: 'review' },
      start_time_ms: 1,
    },
  };
  const s: Snapshot = {
    claim,
    target,
    bids: {},
    outputs: [review],
    registered: new Set(['Writer', 'R']),
    firstSeenMs: 0,
    now: 10,
    policy: { bidTimeoutMs: 1000, maxReviewIterations: max },
  };
  return { s, target, review };
}

describe('decide (pure)', () => {
  it('row 13: review approval semantics (the isApproval table)', () => {
    for (const p of ['{}', '[]', ' {} ', '[ ]', '\n{}\n', '{ }']) expect(isApproval(p), p).toBe(true);
    for (const p of [
      '',
      'null',
      'true',
      '0',
      '"{}"',
      'looks good',
      '{',
      '{"x":1}',
      '["x"]',
      'false',
      '1.5',
    ]) {
      expect(isApproval(p), p).toBe(false);
    }
  });

  it('row 10: exclusive tie-break is byte-wise (uppercase first), independent of bid order', () => {
    expect(grantees('exclusive', { b: 'exclusive', a: 'exclusive', B: 'exclusive' })).toEqual(['B']);
    expect(grantees('exclusive', { a: 'exclusive', B: 'exclusive', b: 'exclusive' })).toEqual(['B']);
    expect(grantees('parallel', { z: 'claim', a: 'claim', y: 'ignore' })).toEqual(['a', 'z']);
  });

  it('row 11: phase order with skipping, and dormancy when nothing is left', () => {
    expect(nextPhase({ a: 'exclusive', b: 'review' })).toBe('review');
    expect(nextPhase({ a: 'exclusive', b: 'claim' })).toBe('parallel');
    expect(nextPhase({ a: 'exclusive' })).toBe('exclusive');
    expect(nextPhase({ a: 'ignore' })).toBeNull();
    expect(nextPhase({ a: 'review', b: 'exclusive' }, 'review')).toBe('exclusive');
    expect(nextPhase({ a: 'review', b: 'claim' }, 'parallel')).toBeNull();
    expect(sanitiseBid('foobar')).toEqual({ bid: 'ignore', invalid: true });
  });

  it('row 26: default 3 — the rejection of v4 ends the loop; v3 still gets a feedback claim', () => {
    const v3 = decide(reviewed(3, 3).s);
    expect(v3.kind === 'write' && v3.before.map((e) => e.kind)).toEqual(['feedback_claim']);
    const v4 = reviewed(4, 3);
    const d = decide(v4.s);
    if (d.kind !== 'write') throw new Error(d.kind);
    expect(d.claim.status).toBe('terminated');
    expect(d.claim.termination_reason).toBe('Terminated after reaching max review iterations (3).');
    expect(d.before).toMatchObject([
      { kind: 'artefact', artefact: { type: 'MaxIterationsExceeded', source_artefacts: [v4.target.id] } },
    ]);
  });

  it('row 26: max_review_iterations 0 means unlimited', () => {
    const d = decide(reviewed(50, 0).s);
    expect(d.kind === 'write' && d.before[0]?.kind).toBe('feedback_claim');
  });

  it('a replayed decision derives the same feedback claim and Failure ids (crash safety)', () => {
    const { s } = reviewed(1, 3);
    const a = decide(s);
    const b = decide({ ...s, now: 99 });
    if (a.kind !== 'write' || b.kind !== 'write') throw new Error('expected writes');
    const idOf = (d: typeof a) => (d.before[0]?.kind === 'feedback_claim' ? d.before[0].claim.id : '');
    expect(idOf(a)).toBe(idOf(b));
    const m1 = decide(reviewed(5, 2).s);
    expect(m1.kind === 'write' && m1.before[0]?.kind === 'artefact').toBe(true);
  });

  it('consensus waits for the snapshot of bidders, then times out naming the silent ones', () => {
    const target = art();
    const claim: Claim = {
      id: randomUUID(),
      artefact_id: target.id,
      status: 'pending_review',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: '',
      expected_bidders: ['A', 'B'],
      created_at_ms: 100,
    };
    const base: Snapshot = {
      claim,
      target,
      bids: { A: 'exclusive', Stray: 'review' },
      outputs: [],
      registered: new Set(['A', 'B', 'C']),
      firstSeenMs: 0,
      now: 150,
      policy: { bidTimeoutMs: 100, maxReviewIterations: 3 },
    };
    expect(decide(base)).toEqual({ kind: 'wait', untilMs: 200, missing: ['B'] });
    const d = decide({ ...base, now: 200 });
    if (d.kind !== 'write') throw new Error(d.kind);
    expect(d.claim.phase_state?.all_bids).toEqual({ A: 'exclusive', B: 'ignore' });
    expect(d.claim.granted_exclusive_agent).toBe('A');
    expect(d.after).toContainEqual({
      kind: 'event',
      event: { event: 'bid_timeout', data: { claim_id: claim.id, silent_agents: ['B'], timeout_ms: 100 } },
    });
    // The grant is recorded in the same write that the announcement follows.
    expect(d.after).toContainEqual({
      kind: 'grant',
      role: 'A',
      claimType: 'exclusive',
      phase: 'exclusive',
      reason: 'grant',
    });
    expect(pendingGrants(d.claim, [])).toEqual([{ role: 'A', claimType: 'exclusive', phase: 'exclusive' }]);
    expect(pendingGrants(d.claim, [art({ produced_by_role: 'A', source_artefacts: [target.id] })])).toEqual(
      [],
    );
    // A bid in after the deadline but before the decision (an orchestrator running behind) counts.
    const behind = decide({ ...base, bids: { A: 'exclusive', B: 'review' }, now: 450 });
    if (behind.kind !== 'write') throw new Error(behind.kind);
    expect(behind.claim.phase_state?.all_bids).toEqual({ A: 'exclusive', B: 'review' });
    expect(behind.claim.granted_review_agents).toEqual(['B']);
    expect(behind.after.some((e) => e.kind === 'event' && e.event.event === 'bid_timeout')).toBe(false);
  });

  it("a granted agent's Question is not its output: the claim stays granted in every phase", () => {
    const target = art();
    const question = (role: string) =>
      art({
        structural_type: 'Question',
        type: 'Question',
        payload: 'which db?',
        produced_by_role: role,
        source_artefacts: [target.id],
      });
    const phased = (current: 'review' | 'exclusive', role: string): Claim => ({
      id: randomUUID(),
      artefact_id: target.id,
      status: current === 'review' ? 'pending_review' : 'pending_exclusive',
      granted_review_agents: current === 'review' ? [role] : [],
      granted_parallel_agents: [],
      granted_exclusive_agent: current === 'exclusive' ? role : '',
      phase_state: {
        current,
        granted_agents: [role],
        received: {},
        all_bids: { [role]: current },
        start_time_ms: 1,
      },
    });
    const snap = (claim: Claim, outputs: Artefact[]): Snapshot => ({
      claim,
      target,
      bids: {},
      outputs,
      registered: new Set(['Writer', 'R', 'Coder']),
      firstSeenMs: 0,
      now: 10,
      policy: { bidTimeoutMs: 1000, maxReviewIterations: 3 },
    });
    // Exclusive: a Question does not complete the claim; the real output does.
    const ex = phased('exclusive', 'Coder');
    expect(decide(snap(ex, [question('Coder')]))).toEqual({ kind: 'idle', why: 'awaiting_outputs' });
    const code = art({ produced_by_role: 'Coder', source_artefacts: [target.id], created_at_ms: 2 });
    const done = decide(snap(ex, [question('Coder'), code]));
    expect(done.kind === 'write' && done.claim.status).toBe('complete');
    expect(done.kind === 'write' && done.claim.phase_state?.received).toEqual({ Coder: code.id });
    // Review: a reviewer's Question is not a rejection (nor an approval).
    const rv = phased('review', 'R');
    expect(decide(snap(rv, [question('R')]))).toEqual({ kind: 'idle', why: 'awaiting_outputs' });
    // Feedback claim: the producer's Question is not its rework.
    const fb: Claim = {
      ...phased('exclusive', 'Writer'),
      status: 'pending_assignment',
      phase_state: undefined,
    };
    expect(decide(snap(fb, [question('Writer')]))).toEqual({ kind: 'idle', why: 'awaiting_rework' });
    // The agent holds the grant and waits for the Answer: it is not re-announced.
    expect(pendingGrants(ex, [question('Coder')])).toEqual([]);
    expect(pendingGrants(fb, [question('Writer')])).toEqual([]);
  });
});
