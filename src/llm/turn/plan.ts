import { z } from 'zod';

// The planning hierarchy (goal → tasks → subtasks, nested on escalation), pure (docs/runtime-model.md § Tools). The plan lives in the
// turn state; the loop applies these transitions and records the result as a step.

export type NodeStatus = 'pending' | 'done' | 'failed' | 'decomposed';

export interface PlanNode {
  id: string;
  description: string;
  status: NodeStatus;
  failures: number;
  reasons: string[];
  children: PlanNode[];
}

export interface Plan {
  goal: string;
  tasks: PlanNode[];
}

/** A subtask that fails this often is escalated (decomposed further, then given up). */
export const MAX_SUBTASK_FAILURES = 2;
/** task = 1, subtask = 2, decomposed subtask = 3: deeper than that, escalation gives up. */
export const MAX_DEPTH = 3;

/** What the model must answer to "decompose the goal" (structured output). */
export const Decomposition = z.object({
  tasks: z
    .array(
      z.object({
        description: z.string().min(1),
        subtasks: z.array(z.string().min(1)).min(1).max(8),
      }),
    )
    .min(1)
    .max(6),
});
export const SubDecomposition = z.object({ subtasks: z.array(z.string().min(1)).min(1).max(8) });

const node = (id: string, description: string, children: PlanNode[] = []): PlanNode => ({
  id,
  description,
  status: 'pending',
  failures: 0,
  reasons: [],
  children,
});

export function planFrom(goal: string, d: z.infer<typeof Decomposition>): Plan {
  return {
    goal,
    tasks: d.tasks.map((t, i) =>
      node(
        `${i + 1}`,
        t.description,
        t.subtasks.map((s, j) => node(`${i + 1}.${j + 1}`, s)),
      ),
    ),
  };
}

/** When the model cannot decompose: one task, one subtask, the goal itself. */
export const trivialPlan = (goal: string): Plan =>
  planFrom(goal, { tasks: [{ description: goal, subtasks: [goal] }] });

/** The deepest pending leaf in order, with its depth (tasks are depth 1). */
export function activeLeaf(p: Plan): { node: PlanNode; depth: number } | undefined {
  const walk = (ns: PlanNode[], depth: number): { node: PlanNode; depth: number } | undefined => {
    for (const n of ns) {
      if (n.status === 'done' || n.status === 'failed') continue;
      if (n.children.length) {
        const found = walk(n.children, depth + 1);
        if (found) return found;
        continue;
      }
      return { node: n, depth };
    }
    return undefined;
  };
  return walk(p.tasks, 1);
}

function mapNode(ns: PlanNode[], id: string, f: (n: PlanNode) => PlanNode): PlanNode[] {
  return ns.map((n) => (n.id === id ? f(n) : { ...n, children: mapNode(n.children, id, f) }));
}

/** Parents whose children are all done are done too (bottom-up). */
function settle(ns: PlanNode[]): PlanNode[] {
  return ns.map((n) => {
    if (!n.children.length) return n;
    const children = settle(n.children);
    const done = children.every((c) => c.status === 'done');
    return { ...n, children, status: done ? 'done' : n.status };
  });
}

export type PlanEffect =
  | { kind: 'advanced'; next: PlanNode }
  | { kind: 'complete' }
  | { kind: 'retry'; node: PlanNode }
  | { kind: 'decompose'; node: PlanNode }
  | { kind: 'give_up'; node: PlanNode; reason: string }
  | { kind: 'no_active' };

/** `mark_subtask_complete(success, reason)` on the active leaf. */
export function markSubtask(p: Plan, success: boolean, reason: string): { plan: Plan; effect: PlanEffect } {
  const a = activeLeaf(p);
  if (!a) return { plan: p, effect: { kind: 'no_active' } };
  if (success) {
    const plan = { ...p, tasks: settle(mapNode(p.tasks, a.node.id, (n) => ({ ...n, status: 'done' }))) };
    const next = activeLeaf(plan);
    return { plan, effect: next ? { kind: 'advanced', next: next.node } : { kind: 'complete' } };
  }
  const failed = { ...a.node, failures: a.node.failures + 1, reasons: [...a.node.reasons, reason] };
  const tasks = mapNode(p.tasks, a.node.id, () => failed);
  const plan = { ...p, tasks };
  if (failed.failures < MAX_SUBTASK_FAILURES) return { plan, effect: { kind: 'retry', node: failed } };
  if (a.depth < MAX_DEPTH) return { plan, effect: { kind: 'decompose', node: failed } };
  const given = {
    ...p,
    tasks: mapNode(p.tasks, a.node.id, () => ({ ...failed, status: 'failed' as const })),
  };
  return {
    plan: given,
    effect: { kind: 'give_up', node: failed, reason: `subtask ${failed.id} failed ${failed.failures} times` },
  };
}

/** Escalation: the failed leaf becomes a parent of smaller steps. */
export function decompose(p: Plan, id: string, subtasks: string[]): Plan {
  return {
    ...p,
    tasks: mapNode(p.tasks, id, (n) => ({
      ...n,
      status: 'decomposed',
      children: subtasks.map((s, i) => node(`${id}.${i + 1}`, s)),
    })),
  };
}

/** The plan as the model sees it: one line per node, the active one marked. */
export function renderPlan(p: Plan): string {
  const active = activeLeaf(p)?.node.id;
  const lines: string[] = [`GOAL: ${p.goal}`];
  const walk = (ns: PlanNode[], indent: string) => {
    for (const n of ns) {
      const mark = n.id === active ? '→' : n.status === 'done' ? '✓' : n.status === 'failed' ? '✗' : ' ';
      lines.push(
        `${indent}${mark} [${n.id}] ${n.description}${n.failures ? ` (failed ${n.failures}x)` : ''}`,
      );
      walk(n.children, `${indent}  `);
    }
  };
  walk(p.tasks, '');
  return lines.join('\n');
}
