import { endingToolNames } from '../../api/agent.ts';
import { SUBMIT_RESULT } from '../tools/tools.ts';
import { type ResultFields, resultProblem } from './contract.ts';

// The step policy of a turn (docs/runtime-model.md § How a turn ends): pure decisions the loop asks before and
// after each model call.

export type StepDecision =
  | { kind: 'exhausted' }
  | { kind: 'call'; step: number; final: boolean; warning?: string };

/**
 * Before model call number `llmSteps + 1`: a warning when two steps remain, the last step may only
 * call the tools that end a turn (`ending`: submit_result, or must_end_with's), and past the budget
 * the turn is over.
 */
export function nextStep(
  llmSteps: number,
  maxSteps: number,
  ending: string[] = [SUBMIT_RESULT],
): StepDecision {
  if (llmSteps >= maxSteps) return { kind: 'exhausted' };
  const step = llmSteps + 1;
  const remaining = maxSteps - llmSteps;
  const names = ending.join(' or ');
  if (remaining === 1)
    return {
      kind: 'call',
      step,
      final: true,
      warning: `This is your last step: only ${names} ${ending.length > 1 ? 'are' : 'is'} available now. End the turn.`,
    };
  if (remaining === 2)
    return {
      kind: 'call',
      step,
      final: false,
      warning: `Two steps remain in this turn (this one and the last). The last step can only call ${names}; wrap up.`,
    };
  return { kind: 'call', step, final: false };
}

export const EMPTY_REPLY_PLACEHOLDER = '(the model ended the turn without any text)';

export type NoToolDecision = { kind: 'end'; text: string } | { kind: 'nudge'; message: string };

/**
 * A reply without tool calls (docs/runtime-model.md § How a turn ends): with no must_end_with, its text is the result (a
 * placeholder when empty), unless the agent declares result fields the text does not carry; otherwise
 * the model is told which tool it must call, or what the result lacks, and the loop goes on.
 */
export function onNoToolCalls(
  mustEndWith: string | undefined,
  content: string,
  fields?: ResultFields,
): NoToolDecision {
  const required = endingToolNames(mustEndWith);
  if (required.length)
    return {
      kind: 'nudge',
      message: `You replied without calling a tool. This turn must end with a call to ${required.join(' or ')}; call it now.`,
    };
  const text = content.trim() || EMPTY_REPLY_PLACEHOLDER;
  const problem = resultProblem(text, fields);
  if (!problem) return { kind: 'end', text };
  return {
    kind: 'nudge',
    message: `You replied without calling a tool, and your reply cannot be the result: ${problem}. Call ${SUBMIT_RESULT} with an artefact_payload that carries the declared fields.`,
  };
}

/**
 * The wall-clock time box (docs/runtime-model.md § How a turn ends): why the turn must stop now, or undefined. The turn's clock runs
 * from its first step, the goal's from the oldest artefact of its workflow the turn saw (its goal);
 * both survive a resume, since they are stored with the turn's first step.
 */
export function timeBoxExceeded(
  started: { turnMs: number; goalMs: number },
  limits: { turnMs?: number | undefined; goalMs?: number | undefined },
  nowMs: number,
): string | undefined {
  if (limits.turnMs && started.turnMs && nowMs - started.turnMs > limits.turnMs)
    return `time box: the turn ran for more than ${Math.round(limits.turnMs / 1000)} s`;
  if (limits.goalMs && started.goalMs && nowMs - started.goalMs > limits.goalMs)
    return `time box: the goal has been worked on for more than ${Math.round(limits.goalMs / 1000)} s`;
  return undefined;
}
