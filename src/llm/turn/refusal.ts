import { endingToolNames } from '../../api/agent.ts';
import type { LlmSettings } from '../config.ts';
import type { ToolCall } from '../model/model.ts';
import { callIndex, parseArgs, SUBMIT_RESULT } from '../tools/tools.ts';
import { finalTools, mayEndWith } from './contract.ts';

/** A call that is refused before anything runs: what the model is told, and how the step records it. */
export type Refusal = { content: string; outcome: 'refused' | 'unknown_tool' | 'invalid_args' };

/**
 * Whether a tool call of the model may run at all, decided from the call and the turn's limits alone
 * (pure): not on the last step unless it ends the turn, not past the calls run from one reply, not
 * submit_result where must_end_with leaves it out, not a tool the turn does not offer, not arguments
 * that are not a JSON object. Its arguments when it may.
 */
export function screenCall(
  call: ToolCall,
  turn: {
    llmSteps: number;
    settings: Pick<LlmSettings, 'maxSteps' | 'mustEndWith' | 'maxToolCallsPerReply'>;
    /** The names the turn offers (declared and built-in). */
    offered: string[];
  },
): { ok: true; args: Record<string, unknown> } | ({ ok: false } & Refusal) {
  const name = call.function.name;
  const st = turn.settings;
  const refuse = (content: string, outcome: Refusal['outcome'] = 'refused') =>
    ({ ok: false, content, outcome }) as const;
  const ending = finalTools(st.mustEndWith);
  if (turn.llmSteps >= st.maxSteps && !ending.includes(name))
    return refuse(
      `error: only ${ending.join(' or ')} ${ending.length > 1 ? 'are' : 'is'} allowed on the last step`,
    );
  if (callIndex(call.id) >= st.maxToolCallsPerReply)
    return refuse(
      `error: not run: at most ${st.maxToolCallsPerReply} tool calls are run from one reply. Call it again in a later step if you still need it.`,
    );
  if (name === SUBMIT_RESULT && !mayEndWith(SUBMIT_RESULT, st.mustEndWith))
    return refuse(
      `error: this turn ends only with ${endingToolNames(st.mustEndWith).join(' or ')}, not ${SUBMIT_RESULT}`,
    );
  if (!turn.offered.includes(name))
    return refuse(`error: unknown tool "${name}". Available: ${turn.offered.join(', ')}`, 'unknown_tool');
  const parsed = parseArgs(call.function.arguments);
  if (!parsed.ok)
    return refuse(
      `error: ${parsed.error}. Call ${name} again with arguments matching its schema.`,
      'invalid_args',
    );
  return { ok: true, args: parsed.args };
}
