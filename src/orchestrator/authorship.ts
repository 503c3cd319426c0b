import type { Artefact, Claim } from '../blackboard/types.ts';
import { derivedId } from './ids.ts';

/**
 * Outputs on a claim's target by a role the claim never granted, written after the claim was made:
 * never accepted as its output (the phase logic counts only grantees) and reported once as
 * quarantined. Pure. Pups share one store credential, so a tool that got hold of it could still
 * write under a granted role's name; this catches a role acting outside its grant, nothing more.
 */
export function foreignOutputs(c: Claim, outputs: readonly Artefact[]): Artefact[] {
  if (c.status === 'complete' || c.status === 'terminated') return [];
  const granted = new Set([
    ...c.granted_review_agents,
    ...c.granted_parallel_agents,
    ...(c.granted_exclusive_agent ? [c.granted_exclusive_agent] : []),
    ...(c.phase_state?.granted_agents ?? []),
  ]);
  const context = new Set(c.additional_context_ids ?? []);
  const made = c.created_at_ms ?? 0;
  return outputs.filter(
    (a) =>
      !granted.has(a.produced_by_role) &&
      !context.has(a.id) &&
      a.created_at_ms >= made &&
      // A feedback claim's target also carries the reviews that sent it back (approvals included).
      !(c.status === 'pending_assignment' && a.structural_type === 'Review') &&
      // The orchestrator's own artefacts have ids derived from the claim.
      !(a.produced_by_role === 'orchestrator' && a.id === derivedId(c.id, a.type)),
  );
}
