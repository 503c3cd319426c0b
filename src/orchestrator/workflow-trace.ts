import type { Attributes } from '@opentelemetry/api';
import type { Blackboard } from '../blackboard/client.ts';
import { isApproval } from '../blackboard/review.ts';
import { type Subscription, subscribe } from '../blackboard/subscriber.ts';
import { Artefact } from '../blackboard/types.ts';
import { workflowOutcome } from '../blackboard/workflow-end.ts';
import type { Logger } from '../common/logger.ts';
import { claimContext, GEN_AI, pastSpan } from '../telemetry/spans.ts';

/**
 * The workflow as one span, from its goal to its end: written by the leader when a Terminal (or the
 * orchestrator's own Failure, which ends a workflow) arrives, with the goal's creation as its start and
 * each review rejection, rework and failure on the way as an event. It sits under the span that wrote the goal (the
 * caller's, when the goal continued one), beside the steps and agents of the same trace.
 */

export interface WorkflowSpan {
  goal: Artefact;
  startMs: number;
  endMs: number;
  outcome: 'completed' | 'failed';
  attributes: Attributes;
  events: { name: string; atMs: number; attributes: Attributes }[];
}

export { workflowOutcome };

/** The span of the workflow `end` closes, from its ancestors (`chain`, `end` among them). Pure. */
export function workflowSpan(end: Artefact, chain: Artefact[]): WorkflowSpan | undefined {
  const outcome = workflowOutcome(end);
  const goal = chain
    .filter((a) => a.source_artefacts.length === 0)
    .sort((a, b) => a.created_at_ms - b.created_at_ms)[0];
  if (!outcome || !goal) return undefined;
  const events = [...chain]
    .sort((a, b) => a.created_at_ms - b.created_at_ms)
    .flatMap((a) => {
      const about = {
        'holt.artefact.id': a.id,
        'holt.artefact.type': a.type,
        [GEN_AI.agentName]: a.produced_by_role,
      };
      if (a.structural_type === 'Failure')
        return [{ name: 'failure', atMs: a.created_at_ms, attributes: about }];
      // A rework's sources hold the reviews that rejected the version before it.
      if (a.structural_type === 'Review' && !isApproval(a.payload))
        return [
          {
            name: 'review_rejected',
            atMs: a.created_at_ms,
            attributes: { ...about, 'holt.review.target.id': a.source_artefacts[0] ?? '' },
          },
        ];
      // A version past the first is a rework: a review rejected the one before it.
      if (a.version > 1)
        return [
          {
            name: 'rework',
            atMs: a.created_at_ms,
            attributes: { ...about, 'holt.rework.iteration': a.version - 1 },
          },
        ];
      return [];
    });
  return {
    goal,
    startMs: goal.created_at_ms,
    endMs: Math.max(goal.created_at_ms, end.created_at_ms),
    outcome,
    attributes: {
      'holt.goal.id': goal.id,
      'holt.goal.type': goal.type,
      'holt.workflow.end.id': end.id,
      'holt.workflow.end.type': end.type,
      'holt.workflow.outcome': outcome,
      'holt.workflow.artefacts': chain.length,
      'holt.workflow.reworks': events.filter((e) => e.name === 'rework').length,
      'holt.workflow.review_rejections': events.filter((e) => e.name === 'review_rejected').length,
    },
    events,
  };
}

/** `end` and every artefact it came from, read breadth first (at most `max`; a missing one is skipped). */
export async function ancestorsOf(bb: Blackboard, end: Artefact, max = 500): Promise<Artefact[]> {
  const seen = new Map<string, Artefact>([[end.id, end]]);
  let next = [...end.source_artefacts];
  while (next.length && seen.size < max) {
    const ids = [...new Set(next)].filter((id) => !seen.has(id)).slice(0, max - seen.size);
    next = [];
    for (const a of await Promise.all(ids.map((id) => bb.getArtefact(id).catch(() => null)))) {
      if (!a) continue;
      seen.set(a.id, a);
      next.push(...a.source_artefacts);
    }
  }
  return [...seen.values()];
}

/** Writes the span (its times given, so it covers the whole workflow though made at its end). */
export function emitWorkflowSpan(w: WorkflowSpan): void {
  pastSpan('workflow', {
    parent: claimContext(w.goal),
    startMs: w.startMs,
    endMs: w.endMs,
    attributes: w.attributes,
    events: w.events,
    ...(w.outcome === 'failed' ? { errorType: 'workflow_failed' } : {}),
  });
}

/**
 * Listens for workflow ends and writes their spans while this replica leads (a standby writes none, so
 * a workflow has one). Only started when traces are exported: it reads each ended workflow's artefacts.
 */
export async function traceWorkflows(o: {
  bb: Blackboard;
  redisUrl: string;
  isLeader: () => boolean;
  log: Logger;
}): Promise<Subscription> {
  return subscribe(
    o.redisUrl,
    [o.bb.k.channels.artefactEvents],
    Artefact,
    (a) => {
      if (!o.isLeader() || !workflowOutcome(a)) return;
      ancestorsOf(o.bb, a)
        .then((chain) => {
          const w = workflowSpan(a, chain);
          if (w) emitWorkflowSpan(w);
        })
        .catch((e: unknown) =>
          o.log.warn({ event_type: 'workflow_trace_failed', artefact_id: a.id, error: String(e) }),
        );
    },
    () => undefined, // the leader's own subscription reports malformed artefacts
    { accept: (_c, raw) => raw.includes('"Terminal"') || raw.includes('"Failure"') },
  );
}
