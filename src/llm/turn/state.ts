import { z } from 'zod';
import { ERROR_CLASSES } from '../../blackboard/error-class.ts';
import type { ChatMessage, ToolCall } from '../model/model.ts';
import { emptyProbe, ProbeState } from '../tools/workspace-tools.ts';
import { compacted } from './compaction.ts';
import { emptyLoopState } from './loop-guard.ts';
import type { Plan } from './plan.ts';

// The turn's state is a fold over its stored steps: each step appends messages and carries the
// control state after it. Resuming = loading the steps and folding; nothing lives only in memory.

const ToolCallS = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
export const ChatMessageS = z.union([
  z.object({ role: z.enum(['system', 'user']), content: z.string() }),
  z.object({ role: z.literal('assistant'), content: z.string(), tool_calls: z.array(ToolCallS).optional() }),
  z.object({ role: z.literal('tool'), tool_call_id: z.string(), content: z.string() }),
]);

const PlanNodeS: z.ZodType<Plan['tasks'][number]> = z.lazy(() =>
  z.object({
    id: z.string(),
    description: z.string(),
    status: z.enum(['pending', 'done', 'failed', 'decomposed']),
    failures: z.number(),
    reasons: z.array(z.string()),
    children: z.array(PlanNodeS),
  }),
);

export const Ctl = z.object({
  /** Model calls of the turn's ReAct loop (the step budget counts these). */
  llmSteps: z.number().int().default(0),
  loop: z
    .object({
      actions: z.array(z.object({ sig: z.string(), resultHash: z.string().optional() })),
      blocked: z.array(z.string()),
    })
    .default(emptyLoopState),
  plan: z.object({ goal: z.string(), tasks: z.array(PlanNodeS) }).optional(),
  planned: z.boolean().default(false),
  blocks: z
    .array(z.object({ tool: z.string(), rule: z.string(), reason: z.string(), llmStep: z.number() }))
    .default([]),
  /** An asked question; past `deadlineMs` (when set) the model gets a timeout report instead. */
  waiting: z
    .object({
      toolCallId: z.string(),
      questionId: z.string(),
      deadlineMs: z.number().optional(),
      /** The question asks a person to approve the call (approval.ts): the call runs only once approved. */
      approval: z.boolean().optional(),
    })
    .optional(),
  /** A person's verdict on each call that needed approval (approval.ts), by tool call id. */
  approvals: z
    .record(z.string(), z.object({ approved: z.boolean(), reason: z.string().default('') }))
    .default({}),
  /** Asynchronous tool calls waiting for their result (holt.turn_waiting_tools), with deadlines. */
  toolWaits: z
    .array(z.object({ toolCallId: z.string(), tool: z.string(), deadlineMs: z.number() }))
    .default([]),
  submitted: z
    .object({
      artefact_type: z.string(),
      artefact_payload: z.string(),
      summary: z.string(),
      structural_type: z.enum(['Standard', 'Review', 'Answer', 'Terminal']).optional(),
    })
    .optional(),
  failed: z.object({ reason: z.string(), errorClass: z.enum(ERROR_CLASSES).optional() }).optional(),
  /** When the turn started and its goal was posted (ms), for the time box (policy.ts). */
  startedAtMs: z.number().default(0),
  goalAtMs: z.number().default(0),
  /** The goal's artefact id: a planning agent's plan is kept per goal (plan-store.ts). */
  goalId: z.string().default(''),
  /** Messages before the first exchange (the prompt, the plan): never compacted away. */
  headLength: z.number().int().default(0),
  /** What the state probe reports (workspace-tools.ts). */
  probe: ProbeState.default(emptyProbe),
  /** Unusable model outputs in a row (reset by a usable call); the turn fails at maxOutputErrors. */
  outputErrors: z.number().int().default(0),
  /** The model's text when the turn ended without a tool (must_end_with empty). */
  finalText: z.string().optional(),
  /**
   * The weakest authority of what opened the turn: a life turn woken by its operator's or the runtime's
   * words alone is `agent_note`, anything else (a webhook's message, a claim's artefacts) outside
   * content. What the model saves as a memory keeps it (tools/memory-tools.ts saveLabels).
   */
  evidence: z.enum(['agent_note', 'external_evidence']).default('external_evidence'),
  /** The turn opened with a strategic review (turn/audit.ts): a planning agent plans its goal afresh. */
  reviewed: z.boolean().default(false),
  /** A tool marked `terminate` ended the turn; its output is the result. */
  endedBy: z.object({ tool: z.string(), output: z.string() }).optional(),
});
export type Ctl = z.infer<typeof Ctl>;

/** What one stored step carries in `agent_steps.metadata` (plus diagnostics: usage, cost, tool, ...). */
export const StepMeta = z.looseObject({
  messages: z.array(ChatMessageS).default([]),
  ctl: Ctl.optional(),
  /** A compaction step: its messages replace those in [head, from) (compaction.ts). */
  compact: z
    .object({ head: z.number().int().nonnegative(), from: z.number().int().nonnegative() })
    .optional(),
});
export type StepMeta = z.infer<typeof StepMeta>;

export interface TurnState {
  messages: ChatMessage[];
  ctl: Ctl;
  nextSeq: number;
}

export const initialCtl = (): Ctl => Ctl.parse({});

export function foldSteps(steps: { seq: number; metadata: unknown }[]): TurnState {
  let messages: ChatMessage[] = [];
  let ctl = initialCtl();
  let nextSeq = 0;
  for (const s of [...steps].sort((a, b) => a.seq - b.seq)) {
    const m = StepMeta.parse(s.metadata);
    if (m.compact) messages = compacted(messages, m.compact, m.messages as ChatMessage[]);
    else messages.push(...(m.messages as ChatMessage[]));
    if (m.ctl) ctl = m.ctl;
    nextSeq = s.seq + 1;
  }
  return { messages, ctl, nextSeq };
}

/** Tool calls of the last assistant message without a result yet (the ones a resume must still run). */
export function pendingToolCalls(s: TurnState): ToolCall[] {
  let i = s.messages.length - 1;
  while (i >= 0 && s.messages[i]!.role === 'tool') i--;
  const last = s.messages[i];
  if (last?.role !== 'assistant' || !last.tool_calls?.length) return [];
  const done = new Set(s.messages.slice(i + 1).flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : [])));
  const waiting = new Set([s.ctl.waiting?.toolCallId, ...s.ctl.toolWaits.map((w) => w.toolCallId)]);
  return last.tool_calls.filter((c) => !done.has(c.id) && !waiting.has(c.id));
}

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** A short account of the turn for a Failure artefact: each model step and each tool outcome. */
export function transcriptSummary(messages: ChatMessage[], limit = 4000): string {
  const lines: string[] = [];
  let step = 0;
  for (const m of messages) {
    if (m.role === 'assistant') {
      step++;
      const calls = (m.tool_calls ?? []).map((c) => `${c.function.name}(${cut(c.function.arguments, 80)})`);
      lines.push(
        `step ${step}: ${calls.length ? calls.join(', ') : `said ${JSON.stringify(cut(m.content, 120))}`}`,
      );
    } else if (m.role === 'tool') lines.push(`  → ${cut(m.content.replace(/\s+/g, ' '), 120)}`);
  }
  return cut(lines.join('\n'), limit);
}
