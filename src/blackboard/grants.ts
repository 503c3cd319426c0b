import { v5 as uuidv5 } from 'uuid';
import type { Claim, ClaimType } from './types.ts';

/**
 * Protocol rules every component shares: who holds which grant on a claim, and the one id an
 * execution's output gets. Pure; below the pup, the orchestrator, the inbox and the operator.
 */

export interface Grant {
  claimId: string;
  claimType: ClaimType;
}

const FINAL = new Set<string>(['complete', 'terminated']);

/** Whether `role` holds a grant of `type` on a claim that is still open (Holt checks the granted lists). */
export function isGranted(claim: Claim, role: string, type: ClaimType): boolean {
  if (FINAL.has(claim.status)) return false;
  if (type === 'review') return claim.granted_review_agents.includes(role);
  if (type === 'claim') return claim.granted_parallel_agents.includes(role);
  return claim.granted_exclusive_agent === role;
}

/**
 * The grant this role holds in the claim's current phase, if any. The re-scan uses it: an older phase's
 * grant is done (the claim could not have moved on without it), and a feedback claim is exclusive.
 */
export function currentGrant(claim: Claim, role: string): ClaimType | null {
  switch (claim.status) {
    case 'pending_review':
      return claim.granted_review_agents.includes(role) ? 'review' : null;
    case 'pending_parallel':
      return claim.granted_parallel_agents.includes(role) ? 'claim' : null;
    case 'pending_exclusive':
    case 'pending_assignment':
      return claim.granted_exclusive_agent === role ? 'exclusive' : null;
    default:
      return null;
  }
}

// Fixed namespace for output ids (random once; never change it: ids already written depend on it).
const OUTPUT_NS = '5f0c3a8e-6d0b-4c44-9a53-2d1f1b7e9c41';

/**
 * The id of the one artefact an execution may write: a function of (instance, claim, role, claim type).
 * Write-once artefacts then make a repeated execution (duplicate announcement, re-scan, crash and retry)
 * unable to produce a second result, and "does this grant lack its output" is one EXISTS.
 */
export function outputId(instance: string, claimId: string, role: string, claimType: ClaimType): string {
  return uuidv5(`${instance}/${claimId}/${role}/${claimType}`, OUTPUT_NS);
}

/**
 * The grant `role` holds on `claim` in its current phase and has not answered yet, if any: the
 * current grant, minus grants the orchestrator already recorded as received and dormant claims.
 * Whether the output exists is checked separately (one EXISTS on its `outputId`).
 */
export function openGrant(claim: Claim, role: string): ClaimType | null {
  if (claim.dormant_reason) return null;
  const t = currentGrant(claim, role);
  if (!t) return null;
  if (claim.status !== 'pending_assignment' && claim.phase_state?.received[role]) return null;
  return t;
}
