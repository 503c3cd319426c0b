import { SUBMIT_RESULT } from './tools.ts';

// The step policy of a turn (seed 001 §9, CGC's worker): pure decisions the loop asks before and
// after each model call.

export type StepDecision =
  | { kind: 'exhausted' }
  | { kind: 'call'; step: number; onlySubmit: boolean; warning?: string };

/**
 * Before model call number `llmSteps + 1`: a warning when two steps remain, the last step may only
 * submit, and past the budget the turn is over.
 */
export function nextStep(llmSteps: number, maxSteps: number): StepDecision {
  if (llmSteps >= maxSteps) return { kind: 'exhausted' };
  const step = llmSteps + 1;
  const remaining = maxSteps - llmSteps;
  if (remaining === 1)
    return {
      kind: 'call',
      step,
      onlySubmit: true,
      warning: `This is your last step: only ${SUBMIT_RESULT} is available now. Submit your result.`,
    };
  if (remaining === 2)
    return {
      kind: 'call',
      step,
      onlySubmit: false,
      warning: `Two steps remain in this turn (this one and the last). The last step can only call ${SUBMIT_RESULT}; wrap up.`,
    };
  return { kind: 'call', step, onlySubmit: false };
}

export const EMPTY_REPLY_PLACEHOLDER = '(the model ended the turn without any text)';

export type NoToolDecision = { kind: 'end'; text: string } | { kind: 'nudge'; message: string };

/**
 * A reply without tool calls (seed 001 §9): with no must_end_with, its text is the result (a
 * placeholder when empty); otherwise the model is told which tool it must call and the loop goes on.
 */
export function onNoToolCalls(mustEndWith: string | undefined, content: string): NoToolDecision {
  const required = (mustEndWith ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!required.length) return { kind: 'end', text: content.trim() || EMPTY_REPLY_PLACEHOLDER };
  return {
    kind: 'nudge',
    message: `You replied without calling a tool. This turn must end with a call to ${required.join(' or ')}; call it now.`,
  };
}
