import type { z } from 'zod';
import type { ToolCall } from '../model/model.ts';
import { checkValues } from '../tools/args.ts';
import { MEMORY_TOOLS, type MemoryToolName, runMemoryTool, saveLabels } from '../tools/memory-tools.ts';
import {
  ASK_QUESTION,
  AskArgs,
  builtinArgs,
  type CoreBuiltin,
  MARK_SUBTASK_COMPLETE,
  MarkArgs,
  MemoryArgs,
  SUBMIT_RESULT,
  SubmitArgs,
  UPDATE_MEMORY,
  WAIT,
  WaitArgs,
} from '../tools/tools.ts';
import {
  runWorkTool,
  WORK_COMPLETE,
  WORK_HANDOFF,
  WORK_TOOLS,
  type WorkToolName,
} from '../tools/work-tools.ts';
import { FILE_TOOLS, type FileToolName } from '../tools/workspace-tools.ts';
import { resultProblem } from './contract.ts';
import { mark } from './planning.ts';
import { truncateBytes } from './prompt.ts';
import { ask } from './questions.ts';
import type { TurnScope } from './scope.ts';
import type { Ctl } from './state.ts';
import { fileTool } from './tool-run.ts';

/** Stores a tool call's result message (an unusable one counts towards the bound on unusable outputs). */
export type Reply = (content: string, next?: Ctl, extra?: Record<string, unknown>) => Promise<void>;

/** One screened call of the model, with the ways to answer it. */
export interface CallContext {
  t: TurnScope;
  call: ToolCall;
  args: Record<string, unknown>;
  reply: Reply;
  /** Arguments that do not match the tool's schema: the model is told and asked again. */
  bad: (error: string) => Promise<void>;
}

/** A built-in's arguments parsed with its schema, then handled; bad ones go back to the model. */
const withArgs =
  <S extends z.ZodType>(schema: S, run: (x: CallContext, a: z.output<S>) => Promise<void>) =>
  (x: CallContext): Promise<void> => {
    const a = builtinArgs(schema, x.args);
    return a.ok ? run(x, a.value) : x.bad(a.error);
  };

/** The handler of each core built-in: a built-in without one does not compile. */
export const BUILTIN_HANDLERS: { readonly [K in CoreBuiltin]: (x: CallContext) => Promise<void> } = {
  [SUBMIT_RESULT]: withArgs(SubmitArgs, ({ t, reply }, a) => {
    const ctl = t.state.ctl;
    const problem = resultProblem(a.artefact_payload, t.fields);
    if (problem)
      return reply(
        `error: the result does not carry the declared fields: ${problem}. Call ${SUBMIT_RESULT} again with an artefact_payload that does.`,
        ctl,
        { outcome: 'invalid_result' },
      );
    return reply('submitted; the turn ends', { ...ctl, submitted: a }, { outcome: 'submitted' });
  }),
  [ASK_QUESTION]: withArgs(AskArgs, ({ t, call }, a) => ask(t, call, a.question, a.deadline_seconds)),
  [WAIT]: async (x) => {
    const { t, reply } = x;
    const a = builtinArgs(WaitArgs, x.args);
    if (!a.ok || !t.deps.life) return x.bad(a.ok ? 'wait is for living agents only' : a.error);
    const text = await t.deps.life.wait(a.value);
    if (text.startsWith('error:')) return reply(text, t.state.ctl, { outcome: 'work_error' });
    return reply(text, { ...t.state.ctl, endedBy: { tool: WAIT, output: text } }, { outcome: 'ok' });
  },
  [MARK_SUBTASK_COMPLETE]: withArgs(MarkArgs, ({ t, call }, a) => mark(t, call, a.success, a.reason)),
  [UPDATE_MEMORY]: withArgs(MemoryArgs, async ({ t, reply }, a) => {
    const { deps } = t;
    const content = truncateBytes(deps.scrub.text(a.content), deps.settings.workingMemoryBytes);
    await deps.memory.setMemory(deps.fence, deps.role, content);
    return reply(`working memory saved (${Buffer.byteLength(content)} bytes)`, t.state.ctl, {
      outcome: 'ok',
    });
  }),
};

export const isCoreBuiltin = (name: string): name is CoreBuiltin => Object.hasOwn(BUILTIN_HANDLERS, name);

/** A work item tool (src/work), under the turn's fence. */
export async function workCall(x: CallContext, name: WorkToolName): Promise<void> {
  const { t, call } = x;
  const { deps } = t;
  const a = builtinArgs(WORK_TOOLS[name].schema, x.args);
  if (!a.ok) return x.bad(a.error);
  if (!deps.work) return x.bad('work items are not enabled for this agent');
  // The text the model wrote with this call (a completion's report when it passes none).
  const spoken = t.state.messages.findLast(
    (m) => m.role === 'assistant' && m.tool_calls?.some((c) => c.id === call.id),
  );
  const r = await runWorkTool(deps.work, deps.fence, deps.role, name, a.value, spoken?.content ?? '');
  const failed = r.text.startsWith('error:');
  // The agent the item went to is woken at once (else its loop's next pass finds the message).
  if (!failed && name === WORK_HANDOFF) deps.life?.wake?.(String((a.value as { to?: unknown }).to));
  // A completion report is remembered: `work_search` finds what was concluded without a transcript.
  if (!failed && name === WORK_COMPLETE && r.report && deps.longMemory)
    await deps.longMemory
      .save(deps.role, {
        body: r.report.text,
        kind: 'report',
        scope: 'holt',
        source: { kind: 'work_item', id: r.report.itemId },
        labels: saveLabels(t.state.ctl.evidence, t.state.messages),
      })
      .catch((e: unknown) =>
        deps.log.warn(
          { event_type: 'memory_save_failed', error: String(e) },
          'completion report not remembered',
        ),
      );
  return x.reply(r.text, t.state.ctl, { outcome: failed ? 'work_error' : 'ok' });
}

/** A long-term memory tool (src/memory): saves carry what the turn has seen as their authority. */
export async function memoryCall(x: CallContext, name: MemoryToolName): Promise<void> {
  const { t } = x;
  const { deps } = t;
  const a = builtinArgs(MEMORY_TOOLS[name].schema, x.args);
  if (!a.ok) return x.bad(a.error);
  if (!deps.longMemory) return x.bad('long-term memory is not enabled for this agent');
  const labels = saveLabels(t.state.ctl.evidence, t.state.messages);
  const text = await runMemoryTool(deps.longMemory, deps.role, name, a.value, {
    labels,
    turnId: deps.fence.turnId,
  });
  return x.reply(text, t.state.ctl, { outcome: 'ok' });
}

/** A workspace file tool: its path checked here, the operation run where the tools run. */
export async function fileCall(x: CallContext, name: FileToolName): Promise<void> {
  const a = builtinArgs(FILE_TOOLS[name].schema, x.args);
  if (!a.ok) return x.bad(a.error);
  const fault = checkValues({ path: a.value.path }, 4096);
  if (fault) return x.bad(fault);
  return fileTool(x.t, x.call, name, a.value);
}
