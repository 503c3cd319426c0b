import { z } from 'zod';

/**
 * Work items (docs/runtime-model.md § Work items): an agent's durable objectives, which outlive its turns. An item is open until it
 * is completed (with a completion report) or cancelled; its plan is a draft, ready or needs input; its
 * todo list is replaced whole; it may be blocked by other items or by waits, and asks to be looked at
 * again at `recheck_at`. Readiness is derived from that, never stored. Pure: the store does the I/O.
 */

export const ITEM_STATES = ['open', 'completed', 'cancelled'] as const;
export const PLAN_STATUSES = ['draft', 'ready', 'needs_input'] as const;
export const WAIT_KINDS = ['operator', 'task', 'external', 'timer'] as const;

export const Todo = z.object({ text: z.string().min(1).max(2000), done: z.boolean().default(false) });

/** What blocks an item: another item (until it is completed or cancelled), or a wait of some kind. */
export const Blocker = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('item'), id: z.uuid() }),
  z.object({
    kind: z.literal('wait'),
    wait: z.enum(WAIT_KINDS),
    /** What it waits for (a question id, a task id, a subject), shown to people. */
    on: z.string().min(1).max(500),
    /** When the wait gives up (ms): past it the item is runnable again, and the model told why. */
    deadlineMs: z.number().int().positive().optional(),
    /** The agent's wait (holt.agent_waits) this blocker stands for: cleared when that wait ends. */
    waitId: z.uuid().optional(),
  }),
]);
export type Blocker = z.infer<typeof Blocker>;

export const WorkItem = z.object({
  id: z.uuid(),
  instance: z.string(),
  role: z.string(),
  objective: z.string().min(1).max(4000),
  state: z.enum(ITEM_STATES),
  planStatus: z.enum(PLAN_STATUSES),
  todos: z.array(Todo).max(100),
  blockedBy: z.array(Blocker).max(50),
  recheckAtMs: z.number().int().nullable(),
  report: z.string().nullable(),
  createdAtMs: z.number().int(),
  updatedAtMs: z.number().int(),
});
export type WorkItem = z.infer<typeof WorkItem>;

export const READINESS = ['runnable', 'waiting', 'blocked', 'completed'] as const;
export type Readiness =
  | { kind: 'runnable'; why?: string }
  | { kind: 'waiting'; wait: (typeof WAIT_KINDS)[number]; on: string; untilMs?: number }
  | { kind: 'blocked'; by: string[] }
  | { kind: 'completed' };

/**
 * An item's readiness at `nowMs`, from its own state and the states of the items it names (`states`:
 * id → state; an item not found no longer blocks). A plan that needs input waits on the operator. A wait
 * past its deadline no longer holds the item, and says so (the model is told of the timeout, never left
 * in silence); an item with a `recheck_at` in the past is runnable whatever blocks it (the event may
 * have been lost).
 */
export function readiness(item: WorkItem, nowMs: number, states: Map<string, WorkItem['state']>): Readiness {
  if (item.state !== 'open') return { kind: 'completed' };
  const recheck = item.recheckAtMs !== null && item.recheckAtMs <= nowMs;
  if (recheck) return { kind: 'runnable', why: 'recheck_at passed' };
  const expired = item.blockedBy.find(
    (b) => b.kind === 'wait' && b.deadlineMs !== undefined && b.deadlineMs <= nowMs,
  );
  if (expired?.kind === 'wait')
    return { kind: 'runnable', why: `the ${expired.wait} wait on ${expired.on} timed out` };
  const wait = item.blockedBy.find((b) => b.kind === 'wait');
  if (wait?.kind === 'wait')
    return {
      kind: 'waiting',
      wait: wait.wait,
      on: wait.on,
      ...(wait.deadlineMs ? { untilMs: wait.deadlineMs } : {}),
    };
  if (item.planStatus === 'needs_input')
    return { kind: 'waiting', wait: 'operator', on: 'the plan needs input' };
  const by = item.blockedBy.flatMap((b) => (b.kind === 'item' && states.get(b.id) === 'open' ? [b.id] : []));
  if (by.length) return { kind: 'blocked', by };
  return item.recheckAtMs !== null
    ? { kind: 'waiting', wait: 'timer', on: 'recheck_at', untilMs: item.recheckAtMs }
    : { kind: 'runnable' };
}

/** Items counted by readiness (the Agent's status, `holt work list`). */
export function countByReadiness(
  items: WorkItem[],
  nowMs: number,
): Record<(typeof READINESS)[number], number> {
  const states = new Map(items.map((i) => [i.id, i.state]));
  const out = { runnable: 0, waiting: 0, blocked: 0, completed: 0 };
  for (const i of items) out[readiness(i, nowMs, states).kind]++;
  return out;
}

/** Why an item cannot be completed now (a report is required; a finished item stays finished), or null. */
export function completionProblem(item: WorkItem, report: string): string | null {
  if (item.state !== 'open') return `work item ${item.id} is already ${item.state}`;
  if (!report.trim()) return 'completing a work item needs a completion report: what was done and concluded';
  return null;
}
