import type { ClaimType } from '../../blackboard/types.ts';
import type { TurnEnd } from './scope.ts';
import type { Ctl } from './state.ts';

/**
 * How the last stored step ends the turn, if it does (pure): a failure, a submitted result, a
 * terminating tool's output, or the model's final text. A review's result is always a Review; other
 * results take the agent's result type unless submit_result named one.
 */
export function endOfStep(
  ctl: Ctl,
  turn: { claimType: ClaimType; resultType: string; transcript: () => string },
): TurnEnd | undefined {
  const review = turn.claimType === 'review';
  if (ctl.failed)
    return {
      kind: 'failure',
      reason: ctl.failed.reason,
      transcript: turn.transcript(),
      errorClass: ctl.failed.errorClass ?? 'transient',
    };
  if (ctl.submitted)
    return {
      kind: 'result',
      result: {
        type: ctl.submitted.artefact_type,
        payload: ctl.submitted.artefact_payload,
        summary: ctl.submitted.summary,
        structural_type: ctl.submitted.structural_type ?? (review ? 'Review' : undefined),
      },
    };
  if (ctl.endedBy)
    return {
      kind: 'result',
      result: {
        type: review ? 'Review' : turn.resultType,
        payload: ctl.endedBy.output,
        summary: `ended by ${ctl.endedBy.tool}`,
      },
    };
  if (ctl.finalText !== undefined)
    return {
      kind: 'result',
      result: {
        type: review ? 'Review' : turn.resultType,
        payload: ctl.finalText,
        summary: ctl.finalText.slice(0, 200),
      },
    };
  return undefined;
}
