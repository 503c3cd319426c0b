import { z } from 'zod';
import { agentLabels, type Labels } from '../../life/labels.ts';
import { MAX_MEMORY_CHARS } from '../../memory/types.ts';
import type { ChatMessage } from '../model/model.ts';
import { type LongMemory, showRecalled } from '../stores/long-memory.ts';
import { WORK_TOOL_NAMES } from './work-tools.ts';

/**
 * The model's tools over its long-term memory (src/memory): save a memory, search its memories, search
 * completion reports (its own and its Holt's work). Offered to agents with `llm.memory`.
 */

export const MEMORY_SAVE = 'memory_save';
export const MEMORY_SEARCH = 'memory_search';
export const WORK_SEARCH = 'work_search';

export const MEMORY_TOOLS = {
  [MEMORY_SAVE]: {
    description:
      'Save something worth remembering past this turn: a fact you observed, a decision and why, what worked. Saved memories are recalled by meaning in later turns. scope "holt" shares it with every agent of your Holt.',
    schema: z.object({
      text: z.string().trim().min(1).max(MAX_MEMORY_CHARS),
      kind: z.enum(['note', 'observation', 'action']).optional(),
      scope: z.enum(['agent', 'holt']).optional(),
    }),
  },
  [MEMORY_SEARCH]: {
    description: "Search your long-term memories (and your Holt's shared ones) by meaning and words.",
    schema: z.object({
      query: z.string().trim().min(1).max(2000),
      k: z.number().int().min(1).max(20).optional(),
    }),
  },
  [WORK_SEARCH]: {
    description:
      "Search the completion reports of finished work (yours and your Holt's): what was done and concluded, without the transcripts.",
    schema: z.object({
      query: z.string().trim().min(1).max(2000),
      k: z.number().int().min(1).max(20).optional(),
    }),
  },
} as const;
export type MemoryToolName = keyof typeof MEMORY_TOOLS;
export const isMemoryTool = (n: string): n is MemoryToolName => n in MEMORY_TOOLS;

/** The tools whose results are the runtime's own or the agent's: the rest bring outside content in. */
const INSIDE = new Set([
  'submit_result',
  'ask_question',
  'wait',
  'mark_subtask_complete',
  'update_memory',
  ...Object.keys(MEMORY_TOOLS),
  ...WORK_TOOL_NAMES,
]);

/**
 * The labels of what the model saves now: its own note when the turn has seen only its own, its
 * operator's and the runtime's words; else the turn's content came (in part) from outside, and the
 * memory stays external evidence, so that a poisoned message or tool output saved as a memory can never
 * come back as anything more. Pure.
 */
export function saveLabels(
  opening: 'agent_note' | 'external_evidence',
  messages: readonly ChatMessage[],
): Labels {
  const outside =
    opening === 'external_evidence' ||
    messages.some((m) => m.role === 'assistant' && m.tool_calls?.some((c) => !INSIDE.has(c.function.name)));
  const own = agentLabels(MEMORY_SAVE);
  return outside
    ? { ...own, admission: 'your own turn, after outside content', authority: 'external_evidence' }
    : own;
}

/** Runs a memory tool; the text the model reads back. */
export async function runMemoryTool(
  lm: LongMemory,
  role: string,
  name: MemoryToolName,
  args: Record<string, unknown>,
  ctx: { labels: Labels; turnId: string },
): Promise<string> {
  switch (name) {
    case MEMORY_SAVE: {
      const a = MEMORY_TOOLS[MEMORY_SAVE].schema.parse(args);
      const r = await lm.save(role, {
        body: a.text,
        kind: a.kind ?? 'note',
        ...(a.scope ? { scope: a.scope } : {}),
        source: { kind: 'turn', id: ctx.turnId },
        labels: ctx.labels,
      });
      return r.outcome === 'saved'
        ? `saved as memory ${r.memory.id}`
        : `already remembered (memory ${r.memory.id}, now seen ${r.memory.merged + 1} times)`;
    }
    case MEMORY_SEARCH: {
      const a = MEMORY_TOOLS[MEMORY_SEARCH].schema.parse(args);
      return showRecalled(await lm.recall(role, a.query, a.k ?? 5));
    }
    case WORK_SEARCH: {
      const a = MEMORY_TOOLS[WORK_SEARCH].schema.parse(args);
      return showRecalled(await lm.recall(role, a.query, a.k ?? 5, ['report']));
    }
  }
}
