import type { Artefact } from '../blackboard/types.ts';
import { workflowOutcome } from '../blackboard/workflow-end.ts';
import { traceIdOf } from '../telemetry/carrier.ts';

/**
 * The console's list of workflows, kept up to date one artefact at a time (never by reading the whole
 * board again): a workflow is a goal (an artefact made from nothing) and everything made from it; it
 * runs until a Terminal completes it or the orchestrator's Failure fails it. Pure.
 */

export interface WorkflowRow {
  goalId: string;
  goalType: string;
  /** The goal's payload, cut: untrusted text, shown as text. */
  goal: string;
  status: 'running' | 'completed' | 'failed';
  artefacts: number;
  /** Review rejections and reworks on the way. */
  reworks: number;
  startedAtMs: number;
  updatedAtMs: number;
  /** What ended it (its artefact type), when it ended. */
  endType?: string;
  traceId?: string;
}

const GOAL_CHARS = 300;

export class WorkflowIndex {
  readonly #rows = new Map<string, WorkflowRow>();
  /** Artefact id → the goals it descends from (an artefact from two workflows counts in both). */
  readonly #roots = new Map<string, string[]>();
  /** Goal → the ids of its workflow's artefacts, in the order they came. */
  readonly #members = new Map<string, string[]>();

  /** Takes one artefact in (again: a no-op); the rows it changed. */
  add(a: Artefact): WorkflowRow[] {
    if (this.#roots.has(a.id)) return [];
    const roots = a.source_artefacts.length
      ? [...new Set(a.source_artefacts.flatMap((s) => this.#roots.get(s) ?? []))]
      : [a.id];
    this.#roots.set(a.id, roots);
    for (const g of roots) this.#members.set(g, [...(this.#members.get(g) ?? []), a.id]);
    const changed: WorkflowRow[] = [];
    if (!a.source_artefacts.length) {
      const trace = traceIdOf(a);
      const row: WorkflowRow = {
        goalId: a.id,
        goalType: a.type,
        goal: a.payload.slice(0, GOAL_CHARS),
        status: 'running',
        artefacts: 1,
        reworks: 0,
        startedAtMs: a.created_at_ms,
        updatedAtMs: a.created_at_ms,
        ...(trace ? { traceId: trace } : {}),
      };
      this.#rows.set(a.id, row);
      return [row];
    }
    const outcome = workflowOutcome(a);
    for (const id of roots) {
      const r = this.#rows.get(id);
      if (!r) continue;
      const next: WorkflowRow = {
        ...r,
        artefacts: r.artefacts + 1,
        reworks: r.reworks + (a.version > 1 ? 1 : 0),
        updatedAtMs: Math.max(r.updatedAtMs, a.created_at_ms),
        ...(outcome && r.status === 'running' ? { status: outcome, endType: a.type } : {}),
      };
      this.#rows.set(id, next);
      changed.push(next);
    }
    return changed;
  }

  /** A workflow's row and its artefacts' ids, or undefined for no goal of this board. */
  workflow(goalId: string): { row: WorkflowRow; ids: string[] } | undefined {
    const row = this.#rows.get(goalId);
    return row ? { row, ids: this.#members.get(goalId) ?? [goalId] } : undefined;
  }

  has(id: string): boolean {
    return this.#roots.has(id);
  }

  /** The workflows, the latest activity first. */
  list(): WorkflowRow[] {
    return [...this.#rows.values()].sort((a, b) => b.updatedAtMs - a.updatedAtMs);
  }
}
