import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isApproval } from '../blackboard/review.ts';
import { artefact, claim as newClaim } from '../blackboard/testkit.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { decide, pendingGrants, type Snapshot } from './decide.ts';
import { grantees, nextPhase, sanitiseBid } from './phases.ts';

/** A Writer's Draft, made at time 1. */
const art = (over: Partial<Artefact> = {}): Artefact =>
  artefact({ type: 'Draft', payload: '', produced_by_role: 'Writer', created_at_ms: 1, ...over });

function reviewed(version: number, max: number, producer = 'Writer') {
  const target = art({ version, produced_by_role: producer });
  const review = art({
    structural_type: 'Review',
    type: 'Review',
    payload: 'no',
    produced_by_role: 'R',
    source_artefacts: [target.id],
  });
  const claim = newClaim(target.id, {
    granted_review_agents: ['R'],
    phase_state: {
      current: 'review',
      granted_agents: ['R'],
      received: {},
      all_bids: { R: 'review' },
      start_time_ms: 1,
    },
  });
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
  it('docs/protocol.md row 13: review approval semantics (the isApproval table)', () => {
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

  it('docs/protocol.md row 10: exclusive tie-break is byte-wise (uppercase first), independent of bid order', () => {
    expect(grantees('exclusive', { b: 'exclusive', a: 'exclusive', B: 'exclusive' })).toEqual(['B']);
    expect(grantees('exclusive', { a: 'exclusive', B: 'exclusive', b: 'exclusive' })).toEqual(['B']);
    expect(grantees('parallel', { z: 'claim', a: 'claim', y: 'ignore' })).toEqual(['a', 'z']);
  });

  it('docs/protocol.md row 11: phase order with skipping, and dormancy when nothing is left', () => {
    expect(nextPhase({ a: 'exclusive', b: 'review' })).toBe('review');
    expect(nextPhase({ a: 'exclusive', b: 'claim' })).toBe('parallel');
    expect(nextPhase({ a: 'exclusive' })).toBe('exclusive');
    expect(nextPhase({ a: 'ignore' })).toBeNull();
    expect(nextPhase({ a: 'review', b: 'exclusive' }, 'review')).toBe('exclusive');
    expect(nextPhase({ a: 'review', b: 'claim' }, 'parallel')).toBeNull();
    expect(sanitiseBid('foobar')).toEqual({ bid: 'ignore', invalid: true });
  });

  it('docs/protocol.md row 26: default 3 — the rejection of v4 ends the loop; v3 still gets a feedback claim', () => {
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

  it('docs/protocol.md row 26: max_review_iterations 0 means unlimited', () => {
    const d = decide(reviewed(50, 0).s);
    expect(d.kind === 'write' && d.before[0]?.kind).toBe('feedback_claim');
  });

  it("a feedback claim and the orchestrator's Failure continue the rejected claim's trace", () => {
    const traced = {
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      tracestate: 'v=1',
    };
    const { s } = reviewed(1, 3);
    const rework = decide({ ...s, claim: { ...s.claim, ...traced } });
    expect(rework.kind === 'write' && rework.before[0]).toMatchObject({
      kind: 'feedback_claim',
      claim: traced,
    });
    const last = reviewed(4, 3).s;
    const ended = decide({ ...last, claim: { ...last.claim, ...traced } });
    expect(ended.kind === 'write' && ended.before[0]).toMatchObject({ kind: 'artefact', artefact: traced });
    const untraced = decide(s);
    expect(
      untraced.kind === 'write' && untraced.before[0]?.kind === 'feedback_claim' && untraced.before[0].claim,
    ).not.toHaveProperty('traceparent');
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
    const claim = newClaim(target.id, { expected_bidders: ['A', 'B'], created_at_ms: 100 });
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

describe("decide (pure): a claim dormant for want of bids revives on a silent agent's late bid", () => {
  // Issue 29: the first goal of a new Holt went dormant (no_bids_in_any_phase) because the Drafter's
  // and Linter's pups were not up yet, and stayed so once they were.
  const target = art({ type: 'GoalDefined', produced_by_role: 'user' });
  const fresh = (): Claim => ({
    id: randomUUID(),
    artefact_id: target.id,
    status: 'pending_review',
    granted_review_agents: [],
    granted_parallel_agents: [],
    granted_exclusive_agent: '',
    expected_bidders: ['Drafter', 'Linter', 'Tester'],
    created_at_ms: 1_000,
  });
  const snap = (claim: Claim, bids: Record<string, string>, now: number): Snapshot => ({
    claim,
    target,
    bids,
    outputs: [],
    registered: new Set(['Drafter', 'Linter', 'Tester']),
    firstSeenMs: 0,
    now,
    policy: { bidTimeoutMs: 1000, maxReviewIterations: 3 },
  });
  const written = (d: ReturnType<typeof decide>) => {
    if (d.kind !== 'write') throw new Error(`expected a write, got ${JSON.stringify(d)}`);
    return d;
  };

  it('closes dormant naming the silent agents; nothing revives it until one of them bids', () => {
    const d = written(decide(snap(fresh(), { Tester: 'ignore' }, 2_001)));
    expect(d.claim).toMatchObject({
      dormant_reason: 'no_bids_in_any_phase',
      silent_agents: ['Drafter', 'Linter'],
    });
    // A bid from an agent that was not silent (or none at all) changes nothing.
    expect(decide(snap(d.claim, { Tester: 'ignore' }, 60_000))).toEqual({ kind: 'idle', why: 'dormant' });
  });

  it('a silent agent bids: bidding re-opens with a fresh timeout, then consensus grants', () => {
    const dormant = written(decide(snap(fresh(), { Tester: 'ignore' }, 2_001))).claim;
    const bids = { Tester: 'ignore', Drafter: 'exclusive' };
    const reopened = written(decide(snap(dormant, bids, 90_000)));
    expect(reopened.claim.dormant_reason).toBeUndefined();
    expect(reopened.claim.silent_agents).toBeUndefined();
    expect(reopened.claim.bids_reopened_at_ms).toBe(90_000);
    expect(reopened.after).toContainEqual({
      kind: 'event',
      event: { event: 'bidding_reopened', data: { claim_id: dormant.id, late_bidders: ['Drafter'] } },
    });
    // The Linter, still silent, gets the new window: consensus waits for it until then...
    expect(decide(snap(reopened.claim, bids, 90_500))).toMatchObject({ kind: 'wait', untilMs: 91_000 });
    // ...and grants without it once the window has passed.
    const granted = written(decide(snap(reopened.claim, bids, 91_001)));
    expect(granted.claim).toMatchObject({ status: 'pending_exclusive', granted_exclusive_agent: 'Drafter' });
    expect(granted.after).toContainEqual(
      expect.objectContaining({ kind: 'grant', role: 'Drafter', claimType: 'exclusive' }),
    );
  });

  it('revived and still without a taker: dormant again naming only the agents still silent', () => {
    const dormant = written(decide(snap(fresh(), { Tester: 'ignore' }, 2_001))).claim;
    const bids = { Tester: 'ignore', Drafter: 'ignore' };
    const reopened = written(decide(snap(dormant, bids, 5_000))).claim;
    const again = written(decide(snap(reopened, bids, 6_001))).claim;
    expect(again).toMatchObject({ dormant_reason: 'no_bids_in_any_phase', silent_agents: ['Linter'] });
    // Every expected bidder has answered ignore: nothing is left to revive it.
    const last = written(
      decide(
        snap(
          written(decide(snap(again, { ...bids, Linter: 'ignore' }, 7_000))).claim,
          { ...bids, Linter: 'ignore' },
          7_000,
        ),
      ),
    );
    expect(last.claim.dormant_reason).toBe('no_bids_in_any_phase');
    expect(last.claim.silent_agents).toBeUndefined();
    expect(decide(snap(last.claim, { ...bids, Linter: 'ignore' }, 99_000))).toEqual({
      kind: 'idle',
      why: 'dormant',
    });
  });

  it('a claim dormant after its phases (no_grants_remaining) never revives', () => {
    const c: Claim = {
      ...fresh(),
      dormant_reason: 'no_grants_remaining_after_review',
      silent_agents: ['Drafter'],
    };
    c.phase_state = {
      current: 'review',
      granted_agents: ['Linter'],
      received: {},
      all_bids: {},
      start_time_ms: 1,
    };
    expect(decide(snap(c, { Drafter: 'exclusive' }, 9_000))).toEqual({ kind: 'idle', why: 'dormant' });
  });
});
