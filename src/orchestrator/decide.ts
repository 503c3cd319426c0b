import { feedbackExcerpt, isApproval } from '../blackboard/review.ts';
import type {
  Artefact,
  BidType,
  Claim,
  ClaimStatus,
  ClaimType,
  Phase,
  PhaseState,
} from '../blackboard/types.ts';
import { traceFieldsOf } from '../telemetry/carrier.ts';
import { windowFor } from './bid-windows.ts';
import type { Decision, Effect, LogLine, Snapshot, Timing } from './decision.ts';
import { derivedId } from './ids.ts';
import { CLAIM_TYPE, grantees, nextPhase, sanitiseBid, sortRoles } from './phases.ts';

/**
 * The claim engine's decisions, as one pure function: given a read-only snapshot of a claim and what
 * surrounds it, say what to write next. The caller does the I/O: the `before` effects (idempotent,
 * deterministic ids), one compare-and-set of `claim`, then the `after` effects (announcements).
 */

export type { Decision, Effect, GrantReason, LogLine, Policy, Snapshot, Timing } from './decision.ts';

const STATUS: Record<Phase, ClaimStatus> = {
  review: 'pending_review',
  parallel: 'pending_parallel',
  exclusive: 'pending_exclusive',
};

const hasOwn = (o: object, k: string) => Object.hasOwn(o, k);

interface Draft {
  before: Effect[];
  after: Effect[];
  logs: LogLine[];
  timings: Timing[];
}

const draft = (): Draft => ({ before: [], after: [], logs: [], timings: [] });
const write = (claim: Claim, d: Draft): Decision => ({ kind: 'write', claim, ...d });

export function decide(s: Snapshot): Decision {
  const c = s.claim;
  if (c.status === 'complete' || c.status === 'terminated') return { kind: 'done' };
  if (c.dormant_reason) return revive(s);
  if (c.status === 'pending_assignment') return feedbackProgress(s);
  if (c.grant_queue && !c.granted_exclusive_agent) return resumeQueued(s);
  if (!c.phase_state) {
    if (c.status !== 'pending_review') {
      return write(
        terminated(c, `Recovery failed: claim in phased status (${c.status}) has no persisted phase state`),
        { ...draft(), logs: [{ event_type: 'claim_terminated', level: 'warn', claim_id: c.id }] },
      );
    }
    return consensus(s);
  }
  return phaseProgress(s);
}

function terminated(c: Claim, reason: string): Claim {
  return { ...c, status: 'terminated', termination_reason: reason };
}

// ---- consensus ----

function consensus(s: Snapshot): Decision {
  const c = s.claim;
  // A set comparison against the bidders expected when the claim was made; strays are ignored.
  const expected = c.expected_bidders ?? sortRoles(s.registered);
  const start = c.bids_reopened_at_ms ?? c.created_at_ms ?? s.firstSeenMs;
  const missing = expected.filter((r) => !hasOwn(s.bids, r));
  // The claim waits as long as the slowest bidder it still expects needs (at least the bid timeout).
  const timeoutMs = windowFor(missing, s.bidWindows, s.policy.bidTimeoutMs);
  const deadline = start + timeoutMs;
  if (missing.length && s.now < deadline) return { kind: 'wait', untilMs: deadline, missing };

  const d = draft();
  const bids: Record<string, BidType> = {};
  for (const role of expected) {
    const raw = hasOwn(s.bids, role) ? s.bids[role] : undefined;
    const { bid, invalid } = sanitiseBid(raw);
    bids[role] = bid;
    if (invalid) {
      d.logs.push({
        event_type: 'invalid_bid',
        level: 'warn',
        claim_id: c.id,
        agent_name: role,
        bid_value: raw,
        action_taken: 'treated_as_ignore',
      });
    }
  }
  if (missing.length) {
    d.logs.push({
      event_type: 'bid_timeout',
      level: 'warn',
      claim_id: c.id,
      silent_agents: missing,
      timeout_ms: timeoutMs,
    });
    d.after.push({
      kind: 'event',
      event: {
        event: 'bid_timeout',
        data: { claim_id: c.id, silent_agents: missing, timeout_ms: timeoutMs },
      },
    });
  }
  d.logs.push({
    event_type: 'consensus_achieved',
    level: 'debug',
    claim_id: c.id,
    bid_count: expected.length - missing.length,
    consensus_duration_ms: s.now - start,
  });
  d.timings.push({ metric: 'bid_latency', ms: s.now - start });
  const phase = nextPhase(bids);
  if (!phase) {
    d.logs.push({
      event_type: 'claim_dormant',
      claim_id: c.id,
      reason: 'no_bids_in_any_phase',
      ...(missing.length ? { silent_agents: missing } : {}),
    });
    // The silent agents are kept: a bid from one of them (its pup was not up yet) re-opens bidding.
    return write(
      { ...c, dormant_reason: 'no_bids_in_any_phase', silent_agents: missing.length ? missing : undefined },
      d,
    );
  }
  d.logs.push({ event_type: 'initial_phase_determined', level: 'debug', claim_id: c.id, phase });
  return write(grantPhase(c, phase, bids, s, d), d);
}

/**
 * A dormant claim: it stays so, unless consensus closed it while some expected bidders were silent
 * (their pup was down or still starting) and one of them has bid since. Then bidding re-opens with
 * a fresh bid timeout (the other silent bidders get one more chance too), and consensus runs again.
 * Each re-opening needs a new bid from a bidder silent until then, so a claim revives at most once
 * per expected bidder.
 */
function revive(s: Snapshot): Decision {
  const c = s.claim;
  const heard = (c.silent_agents ?? []).filter((r) => hasOwn(s.bids, r));
  if (!heard.length || c.phase_state || c.status !== 'pending_review')
    return { kind: 'idle', why: 'dormant' };
  const d = draft();
  d.logs.push({ event_type: 'claim_revived', claim_id: c.id, late_bidders: heard });
  d.after.push({
    kind: 'event',
    event: { event: 'bidding_reopened', data: { claim_id: c.id, late_bidders: heard } },
  });
  return write({ ...c, dormant_reason: undefined, silent_agents: undefined, bids_reopened_at_ms: s.now }, d);
}

/** Records the grants of `phase` on the claim; the announcements follow the write. */
function grantPhase(c: Claim, phase: Phase, bids: Record<string, BidType>, s: Snapshot, d: Draft): Claim {
  const now = s.now;
  const roles = grantees(phase, bids);
  const ps: PhaseState = {
    current: phase,
    granted_agents: roles,
    received: {},
    all_bids: bids,
    start_time_ms: now,
  };
  const next: Claim = {
    ...c,
    status: STATUS[phase],
    phase_state: ps,
    artefact_expected: true,
    last_grant_agent: roles.at(-1) ?? '',
    last_grant_time: now,
    // As Holt's: the image of the agent last granted (the one whose work the claim awaits).
    granted_agent_image_id: s.images?.get(roles.at(-1) ?? '') || undefined,
  };
  if (phase === 'review') next.granted_review_agents = roles;
  if (phase === 'parallel') next.granted_parallel_agents = roles;
  if (phase === 'exclusive') next.granted_exclusive_agent = roles[0] ?? '';
  for (const role of roles)
    d.after.push({ kind: 'grant', role, claimType: CLAIM_TYPE[phase], phase, reason: 'grant' });
  d.logs.push({ event_type: `${phase}_phase_granted`, claim_id: c.id, agents: roles });
  return next;
}

// ---- phases ----

function phaseProgress(s: Snapshot): Decision {
  const c = s.claim;
  const ps = c.phase_state as PhaseState;
  const d = draft();
  const granted = new Set(ps.granted_agents);
  const received = { ...ps.received };
  const byId = new Map(s.outputs.map((a) => [a.id, a]));
  // The first output of each granted role counts (stable across restarts: outputs are ordered). A
  // Question is not an output: its agent asked it mid-turn and still holds the grant until answered.
  for (const a of s.outputs) {
    const role = a.produced_by_role;
    if (a.structural_type === 'Question' || !granted.has(role) || hasOwn(received, role)) continue;
    received[role] = a.id;
    d.logs.push({
      event_type: 'phase_artefact_received',
      level: 'debug',
      claim_id: c.id,
      agent_name: role,
      artefact_id: a.id,
      phase: ps.current,
    });
  }
  const changed = Object.keys(received).length !== Object.keys(ps.received).length;
  const nextPs: PhaseState = { ...ps, received };
  const base: Claim = { ...c, phase_state: nextPs };

  // A Failure or Terminal from a granted agent ends the claim (Holt leaves such claims pending).
  const ended = sortRoles(Object.keys(received))
    .map((role) => ({ role, a: byId.get(received[role] as string) }))
    .filter((x) => x.a?.structural_type === 'Failure' || x.a?.structural_type === 'Terminal');
  const failure = ended.find((x) => x.a?.structural_type === 'Failure');
  if (failure?.a) {
    const reason = `Failure from agent '${failure.role}' (${failure.a.type} ${failure.a.id}): ${feedbackExcerpt(failure.a.payload)}`;
    d.logs.push({ event_type: 'claim_terminated', level: 'warn', claim_id: c.id, reason });
    return write(terminated(base, reason), d);
  }
  if (ended[0]?.a) {
    d.logs.push({ event_type: 'claim_complete', claim_id: c.id, terminal_artefact_id: ended[0].a.id });
    return write({ ...base, status: 'complete' }, d);
  }

  const allIn = ps.granted_agents.every((r) => hasOwn(received, r));
  if (allIn) d.timings.push({ metric: 'phase_duration', phase: ps.current, ms: s.now - ps.start_time_ms });
  if (allIn && ps.current === 'exclusive') {
    d.logs.push({ event_type: 'claim_complete', claim_id: c.id });
    return write({ ...base, status: 'complete' }, d);
  }
  if (allIn && ps.current === 'review') return reviewOutcome(s, base, nextPs, byId, d);
  if (allIn && ps.current === 'parallel') {
    d.logs.push({ event_type: 'parallel_phase_complete', claim_id: c.id });
    return transition(s, base, nextPs, d);
  }
  // Persist every receipt, so a restart does not wait again for agents that already answered.
  if (changed) return write(base, d);
  return { kind: 'idle', why: 'awaiting_outputs' };
}

function transition(s: Snapshot, c: Claim, ps: PhaseState, d: Draft): Decision {
  const next = nextPhase(ps.all_bids, ps.current);
  if (!next) {
    const reason = `no_grants_remaining_after_${ps.current}`;
    d.logs.push({ event_type: 'claim_dormant', claim_id: c.id, reason });
    return write({ ...c, dormant_reason: reason }, d);
  }
  d.logs.push({
    event_type: 'phase_transition',
    claim_id: c.id,
    from_status: c.status,
    to_status: STATUS[next],
    next_phase: next,
  });
  return write(grantPhase(c, next, ps.all_bids, s, d), d);
}

function reviewOutcome(
  s: Snapshot,
  c: Claim,
  ps: PhaseState,
  byId: Map<string, Artefact>,
  d: Draft,
): Decision {
  const rejecting: string[] = [];
  for (const role of sortRoles(Object.keys(ps.received))) {
    const id = ps.received[role] as string;
    const payload = byId.get(id)?.payload ?? '';
    if (isApproval(payload)) {
      d.after.push({
        kind: 'event',
        event: {
          event: 'review_approved',
          data: { original_artefact_id: c.artefact_id, reviewer_role: role },
        },
      });
      d.logs.push({ event_type: 'review_approved', claim_id: c.id, reviewer_role: role });
    } else {
      rejecting.push(id);
      d.after.push({
        kind: 'event',
        event: {
          event: 'review_rejected',
          data: {
            original_artefact_id: c.artefact_id,
            reviewer_role: role,
            feedback: feedbackExcerpt(payload),
          },
        },
      });
      d.logs.push({ event_type: 'review_rejection', claim_id: c.id, reviewer_role: role, review_id: id });
    }
  }
  if (!rejecting.length) return transition(s, c, ps, d);
  return feedback(s, c, rejecting, d);
}

/** Single veto: every rejecting review goes into one feedback claim for the producer (§2.9). */
function feedback(s: Snapshot, c: Claim, rejecting: string[], d: Draft): Decision {
  const target = s.target;
  if (!target) {
    d.logs.push({ event_type: 'claim_terminated', level: 'warn', claim_id: c.id });
    return write(terminated(c, `Target artefact ${c.artefact_id} not found`), d);
  }
  const max = s.policy.maxReviewIterations;
  const iteration = target.version - 1;
  const failure = (type: string, payload: string): Effect => {
    const id = derivedId(c.id, type);
    return {
      kind: 'artefact',
      artefact: {
        id,
        logical_id: id,
        version: 1,
        structural_type: 'Failure',
        type,
        payload,
        source_artefacts: [target.id],
        produced_by_role: 'orchestrator',
        ...traceFieldsOf(c),
      },
    };
  };
  if (max > 0 && iteration >= max) {
    d.before.push(
      failure(
        'MaxIterationsExceeded',
        `Max review iterations (${max}) reached for artefact ${target.id} (version ${target.version}). Review feedback loop terminated.`,
      ),
    );
    d.logs.push({ event_type: 'claim_terminated_max_iterations', claim_id: c.id, max_iterations: max });
    // Holt overwrote this reason with the review text; the reason the loop stopped is kept here.
    return write(terminated(c, `Terminated after reaching max review iterations (${max}).`), d);
  }
  const producer = target.produced_by_role;
  if (!s.registered.has(producer)) {
    const text = `Cannot create feedback claim: agent with role '${producer}' no longer exists in configuration.`;
    d.before.push(failure('MissingAgentConfiguration', text));
    d.logs.push({ event_type: 'claim_terminated_missing_agent', claim_id: c.id, producer });
    return write(terminated(c, text), d);
  }
  const fb: Claim = {
    id: derivedId(c.id, 'feedback'),
    artefact_id: target.id,
    status: 'pending_assignment',
    granted_review_agents: [],
    granted_parallel_agents: [],
    granted_exclusive_agent: producer,
    additional_context_ids: rejecting,
    created_at_ms: s.now,
    artefact_expected: true,
    last_grant_agent: producer,
    last_grant_time: s.now,
    granted_agent_image_id: s.images?.get(producer),
    // The rework continues the workflow's trace, as every claim does.
    ...traceFieldsOf(c),
  };
  d.before.push({ kind: 'feedback_claim', claim: fb });
  d.after.push(
    {
      kind: 'event',
      event: {
        event: 'feedback_claim_created',
        data: {
          feedback_claim_id: fb.id,
          original_claim_id: c.id,
          target_agent_role: producer,
          iteration: target.version,
        },
      },
    },
    {
      kind: 'grant',
      role: producer,
      claimType: 'exclusive',
      phase: 'exclusive',
      reason: 'rework',
      claim: fb,
    },
  );
  d.logs.push(
    {
      event_type: 'feedback_claim_created',
      claim_id: fb.id,
      original_claim_id: c.id,
      target_agent_role: producer,
      iteration: iteration + 1,
    },
    { event_type: 'claim_terminated_review_feedback', claim_id: c.id, rejecting_reviews: rejecting },
  );
  return write(
    terminated(c, `Terminated due to negative review feedback. See artefacts: [${rejecting.join(' ')}]`),
    d,
  );
}

// ---- feedback claims and Holt's grant queue ----

/**
 * The producer's output for a feedback claim: its rework (the rejecting reviews do not count, nor
 * does a Question it asked while working: the claim stays granted until it resumes and delivers).
 */
export function feedbackOutput(c: Claim, outputs: Artefact[]): Artefact | undefined {
  return fromGrantee(c, outputs).find((a) => a.structural_type !== 'Question');
}

/** Anything the feedback claim's producer wrote on the target since the grant (a Question included). */
function fromGrantee(c: Claim, outputs: Artefact[]): Artefact[] {
  const context = new Set(c.additional_context_ids ?? []);
  return outputs.filter((a) => a.produced_by_role === c.granted_exclusive_agent && !context.has(a.id));
}

function feedbackProgress(s: Snapshot): Decision {
  const c = s.claim;
  const out = feedbackOutput(c, s.outputs);
  if (!out) return { kind: 'idle', why: 'awaiting_rework' };
  const d = draft();
  if (out.structural_type === 'Failure') {
    const reason = `Failure from agent '${out.produced_by_role}' (${out.type} ${out.id}): ${feedbackExcerpt(out.payload)}`;
    d.logs.push({ event_type: 'claim_terminated', level: 'warn', claim_id: c.id, reason });
    return write(terminated(c, reason), d);
  }
  d.logs.push({ event_type: 'feedback_claim_complete', claim_id: c.id, artefact_id: out.id });
  return write({ ...c, status: 'complete' }, d);
}

/** A claim Holt paused for a busy controller (M3.5): grant it now; worker pools handle capacity. */
function resumeQueued(s: Snapshot): Decision {
  const c = s.claim;
  const role = c.grant_queue?.agent_name ?? '';
  const d = draft();
  const bids = c.phase_state?.all_bids ?? { [role]: 'exclusive' };
  const claim = grantPhase({ ...c, grant_queue: null }, 'exclusive', { [role]: 'exclusive' }, s, d);
  if (claim.phase_state) claim.phase_state.all_bids = bids;
  d.after.push({ kind: 'dequeue', role });
  d.logs.push({ event_type: 'grant_resumed_from_queue', claim_id: c.id, agent_name: role });
  return write(claim, d);
}

// ---- recovery ----

/**
 * Grants recorded on the claim whose agent has written nothing on the target yet (re-announced after a
 * restart, or when an announcement may have been lost). An agent that asked a Question has the grant in
 * hand and is waiting for the Answer, so it is not re-announced.
 */
export function pendingGrants(
  c: Claim,
  outputs: Artefact[],
): { role: string; claimType: ClaimType; phase: Phase }[] {
  if (c.status === 'complete' || c.status === 'terminated' || c.dormant_reason) return [];
  if (c.status === 'pending_assignment') {
    return c.granted_exclusive_agent && !fromGrantee(c, outputs).length
      ? [{ role: c.granted_exclusive_agent, claimType: 'exclusive', phase: 'exclusive' }]
      : [];
  }
  const ps = c.phase_state;
  if (!ps) return [];
  const produced = new Set(outputs.map((a) => a.produced_by_role));
  return ps.granted_agents
    .filter((r) => r && !hasOwn(ps.received, r) && !produced.has(r))
    .map((role) => ({ role, claimType: CLAIM_TYPE[ps.current], phase: ps.current }));
}
