import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { claim as newClaim, phaseState as phase } from '../pup/testkit.ts';
import { AgentLoad, countInFlight, openOutputs } from './agent-load.ts';
import { openGrant, outputId } from './grants.ts';
import type { Claim } from './types.ts';

const ROLE = 'coder';
const claim = (over: Partial<Claim>): Claim => newClaim(randomUUID(), over);

describe('open grants (pure)', () => {
  it('openGrant: current phase only, received and dormant excluded, feedback claims count', () => {
    expect(openGrant(claim({ status: 'pending_review', granted_review_agents: [ROLE] }), ROLE)).toBe(
      'review',
    );
    expect(openGrant(claim({ status: 'pending_parallel', granted_parallel_agents: [ROLE] }), ROLE)).toBe(
      'claim',
    );
    expect(openGrant(claim({ status: 'pending_exclusive', granted_exclusive_agent: ROLE }), ROLE)).toBe(
      'exclusive',
    );
    expect(openGrant(claim({ status: 'pending_assignment', granted_exclusive_agent: ROLE }), ROLE)).toBe(
      'exclusive',
    );
    // An older phase's grant (review done, now exclusive for someone else) is not in flight.
    expect(
      openGrant(
        claim({ status: 'pending_exclusive', granted_review_agents: [ROLE], granted_exclusive_agent: 'x' }),
        ROLE,
      ),
    ).toBeNull();
    expect(
      openGrant(
        claim({
          status: 'pending_parallel',
          granted_parallel_agents: [ROLE, 'b'],
          phase_state: phase('parallel', [ROLE, 'b'], { [ROLE]: randomUUID() }),
        }),
        ROLE,
      ),
    ).toBeNull();
    expect(
      openGrant(
        claim({ status: 'pending_exclusive', granted_exclusive_agent: ROLE, dormant_reason: 'x' }),
        ROLE,
      ),
    ).toBeNull();
    expect(openGrant(claim({ status: 'complete', granted_exclusive_agent: ROLE }), ROLE)).toBeNull();
  });

  it('openOutputs lists every role of every claim once, with the id its output would get', () => {
    const review = claim({ status: 'pending_review', granted_review_agents: ['r1', 'r2'] });
    const par = claim({
      status: 'pending_parallel',
      granted_parallel_agents: [ROLE, 'tester'],
      phase_state: phase('parallel', [ROLE, 'tester'], { tester: randomUUID() }),
    });
    const old = claim({
      status: 'pending_exclusive',
      granted_review_agents: ['r1'],
      granted_exclusive_agent: ROLE,
    });
    const open = openOutputs('i', [review, par, old]);
    expect(open).toEqual([
      { role: 'r1', id: outputId('i', review.id, 'r1', 'review') },
      { role: 'r2', id: outputId('i', review.id, 'r2', 'review') },
      { role: ROLE, id: outputId('i', par.id, ROLE, 'claim') },
      { role: ROLE, id: outputId('i', old.id, ROLE, 'exclusive') },
    ]);
  });

  it('countInFlight leaves out answered grants, and roles with none', () => {
    const open = [{ role: 'a' }, { role: 'a' }, { role: 'b' }, { role: 'c' }];
    expect(countInFlight(open, [false, true, false, true])).toEqual({ a: 1, b: 1 });
    expect(countInFlight([], [])).toEqual({});
  });

  it('the published shape refuses negative or fractional counts', () => {
    expect(AgentLoad.safeParse({ updated_at_ms: 1, in_flight: { a: 2 } }).success).toBe(true);
    expect(AgentLoad.safeParse({ updated_at_ms: 1, in_flight: { a: -1 } }).success).toBe(false);
    expect(AgentLoad.safeParse({ updated_at_ms: 1, in_flight: { a: 0.5 } }).success).toBe(false);
  });
});
