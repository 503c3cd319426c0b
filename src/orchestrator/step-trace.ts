import type { Attributes, Span } from '@opentelemetry/api';
import type { Claim } from '../blackboard/types.ts';
import { claimContext, inSpan, markFailed } from '../telemetry/spans.ts';
import type { Decision, LogLine } from './decision.ts';

type Write = Extract<Decision, { kind: 'write' }>;

/**
 * One orchestrator step on a claim as a span of the claim's trace: what it decided (its log lines and
 * grants) as span events, the claim's status after it. Artefacts the step writes (a Failure, a review
 * feedback) are written inside it, so they carry it.
 */
export function tracedStep(
  claim: Claim,
  d: Write,
  apply: () => Promise<number | null>,
): Promise<number | null> {
  return inSpan(
    'orchestrator step',
    {
      parent: claimContext(claim),
      attributes: { 'holt.claim.id': claim.id, 'holt.artefact.id': claim.artefact_id },
    },
    async (span) => {
      const rev = await apply();
      record(span, d, rev);
      return rev;
    },
  );
}

function record(span: Span, d: Write, rev: number | null): void {
  if (rev === null) {
    // Another writer moved the claim first: nothing of this decision happened.
    span.setAttribute('holt.step.cas_lost', true);
    return;
  }
  span.setAttribute('holt.claim.status', d.claim.status);
  for (const line of d.logs) span.addEvent(line.event_type, flat(line));
  for (const e of d.after)
    if (e.kind === 'grant')
      span.addEvent('grant', {
        'gen_ai.agent.name': e.role,
        'holt.claim.type': e.claimType,
        'holt.grant.reason': e.reason,
      });
  // A claim ended by its review's feedback is the review loop working (a rework follows), not an error.
  const reworked = d.logs.some((l) => l.event_type === 'claim_terminated_review_feedback');
  if (d.claim.status === 'terminated' && !reworked) markFailed(span, 'claim_terminated');
}

/** A log line's scalar fields as event attributes (lists as strings): never payloads, which logs do not carry. */
function flat(line: LogLine): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(line)) {
    if (k === 'event_type' || k === 'level' || v === undefined || v === null) continue;
    out[`holt.${k}`] =
      typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : JSON.stringify(v);
  }
  return out;
}
