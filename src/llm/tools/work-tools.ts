import { z } from 'zod';
import { handOff } from '../../life/handoff.ts';
import type { Fence } from '../../state/schema.ts';
import { readiness, Todo, type WorkItem } from '../../work/items.ts';
import type { WorkStore, Written } from '../../work/store.ts';

/**
 * The model's tools over its work items (src/work): create, update, pick, get, list, complete. A
 * completion needs a report: the `report` argument, else the text the model wrote with the call; with
 * neither, the model is asked for it (one round) and the item stays open.
 */

export const WORK_CREATE = 'work_create';
export const WORK_UPDATE = 'work_update';
export const WORK_PICK = 'work_pick';
export const WORK_GET = 'work_get';
export const WORK_LIST = 'work_list';
export const WORK_COMPLETE = 'work_complete';
export const WORK_HANDOFF = 'work_handoff';

const id = z.uuid('must be a work item id');
export const WORK_TOOLS = {
  [WORK_CREATE]: {
    description:
      'Create a work item: a durable objective that outlives this turn (the first one becomes current).',
    schema: z.object({ objective: z.string().min(1).max(4000) }),
  },
  [WORK_UPDATE]: {
    description:
      'Update a work item (your current one when no id is given): its objective, plan status (draft, ready, needs_input), todo list (replaced whole), or a time to look at it again (recheck_in_seconds).',
    schema: z.object({
      id: id.optional(),
      objective: z.string().min(1).max(4000).optional(),
      plan_status: z.enum(['draft', 'ready', 'needs_input']).optional(),
      todos: z.array(Todo).max(100).optional(),
      recheck_in_seconds: z
        .number()
        .int()
        .positive()
        .max(30 * 86_400)
        .optional(),
    }),
  },
  [WORK_PICK]: { description: 'Make an open work item your current one.', schema: z.object({ id }) },
  [WORK_GET]: {
    description: 'Show a work item (your current one when no id is given).',
    schema: z.object({ id: id.optional() }),
  },
  [WORK_LIST]: {
    description: 'List your open work items (all of them with all: true), with their readiness.',
    schema: z.object({ all: z.boolean().optional() }),
  },
  [WORK_COMPLETE]: {
    description:
      'Complete a work item (your current one when no id is given) with its completion report: what was done and what was concluded. Write the report as your message text, or pass it as report.',
    schema: z.object({ id: id.optional(), report: z.string().max(20_000).optional() }),
  },
  [WORK_HANDOFF]: {
    description:
      'Hand an open work item (your current one when no id is given), unfinished, to another living agent of your Holt, with a note saying where it stands and what is left. It becomes theirs; they are told.',
    schema: z.object({
      id: id.optional(),
      to: z.string().min(1).max(253),
      note: z.string().trim().min(1).max(4000),
    }),
  },
} as const;
export type WorkToolName = keyof typeof WORK_TOOLS;
export const WORK_TOOL_NAMES = Object.keys(WORK_TOOLS) as WorkToolName[];
export const isWorkTool = (n: string): n is WorkToolName => n in WORK_TOOLS;

/** An item as the model reads it: one line of facts, then its todos. */
export function describeItem(
  i: WorkItem,
  nowMs: number,
  states = new Map<string, WorkItem['state']>(),
): string {
  const r = readiness(i, nowMs, states);
  const how =
    r.kind === 'waiting'
      ? `waiting (${r.wait}: ${r.on})`
      : r.kind === 'blocked'
        ? `blocked by ${r.by.join(', ')}`
        : r.kind;
  const todos = i.todos.map((t) => `  [${t.done ? 'x' : ' '}] ${t.text}`);
  return [
    `${i.id} · ${i.state} · plan ${i.planStatus} · ${how}: ${i.objective}`,
    ...todos,
    ...(i.report ? [`  report: ${i.report}`] : []),
  ].join('\n');
}

const said = (w: Written<WorkItem>, ok: (i: WorkItem) => string): { text: string } =>
  w.ok ? { text: ok(w.value) } : { text: `error: ${w.error}` };

/**
 * Runs one work tool for `role` under the turn's fence. `spoken` is the text the model wrote with the
 * call (a completion's report when it passes none). A lost fence throws FenceLostError.
 */
export async function runWorkTool(
  store: WorkStore,
  f: Fence,
  role: string,
  name: WorkToolName,
  a: Record<string, unknown>,
  spoken: string,
  nowMs = Date.now(),
): Promise<{ text: string; report?: { itemId: string; text: string } }> {
  let itemId = typeof a.id === 'string' ? a.id : '';
  if (!itemId && (name === WORK_UPDATE || name === WORK_COMPLETE || name === WORK_HANDOFF)) {
    itemId = (await store.current(f.instance, role))?.id ?? '';
    if (!itemId) return { text: `error: you have no current work item; pass its id to ${name}` };
  }
  switch (name) {
    case WORK_CREATE:
      return said(
        await store.create(f, role, String(a.objective)),
        (i) => `created ${describeItem(i, nowMs)}`,
      );
    case WORK_UPDATE:
      return said(
        await store.update(f, role, itemId, {
          ...(a.objective !== undefined ? { objective: String(a.objective) } : {}),
          ...(a.plan_status !== undefined
            ? { planStatus: a.plan_status as 'draft' | 'ready' | 'needs_input' }
            : {}),
          ...(a.todos !== undefined ? { todos: a.todos as { text: string; done?: boolean }[] } : {}),
          ...(a.recheck_in_seconds !== undefined
            ? { recheckAtMs: nowMs + Number(a.recheck_in_seconds) * 1000 }
            : {}),
        }),
        (i) => `updated ${describeItem(i, nowMs)}`,
      );
    case WORK_PICK:
      return said(await store.pick(f, role, itemId), (i) => `current: ${describeItem(i, nowMs)}`);
    case WORK_GET: {
      const i = itemId ? await store.get(f.instance, role, itemId) : await store.current(f.instance, role);
      return {
        text: i ? describeItem(i, nowMs) : itemId ? `error: no work item ${itemId}` : 'no current work item',
      };
    }
    case WORK_LIST: {
      const items = await store.list(f.instance, role, { all: a.all === true });
      const states = new Map(items.map((i) => [i.id, i.state]));
      return {
        text: items.length ? items.map((i) => describeItem(i, nowMs, states)).join('\n') : 'no work items',
      };
    }
    case WORK_HANDOFF:
      return said(
        await handOff(store.pool, f, role, itemId, String(a.to), String(a.note)),
        (i) => `handed to ${a.to}: ${describeItem(i, nowMs)}`,
      );
    case WORK_COMPLETE: {
      const report = (typeof a.report === 'string' && a.report.trim() ? a.report : spoken).trim();
      if (!report)
        return {
          text: 'error: the work item stays open: a completion needs its report. Write what was done and concluded, then call work_complete again (as report, or as your message text).',
        };
      const done = said(
        await store.complete(f, role, itemId, report),
        (i) => `completed ${describeItem(i, nowMs)}`,
      );
      return done.text.startsWith('error:') ? done : { ...done, report: { itemId, text: report } };
    }
  }
}
