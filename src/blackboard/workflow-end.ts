import type { Artefact } from './types.ts';

/**
 * Whether an artefact ends its workflow, and how: a Terminal completes it; the orchestrator's own
 * Failure (its iterations spent, its agent missing) fails it. An agent's Failure may be retried: the
 * workflow goes on. The rule `holt watch`, the workflow span and the console share. Pure.
 */
export function workflowOutcome(a: Artefact): 'completed' | 'failed' | undefined {
  if (a.structural_type === 'Terminal') return 'completed';
  if (a.structural_type === 'Failure' && a.produced_by_role === 'orchestrator') return 'failed';
  return undefined;
}
