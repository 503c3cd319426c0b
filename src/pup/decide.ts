import { v5 as uuidv5 } from 'uuid';
import { BidType, type Claim, type ClaimType } from '../blackboard/types.ts';

/** Pure decisions of the pup: who is granted what, when to bid, what to bid, which id an output gets. */

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

/** Bids are collected while a normal claim has no phase yet; feedback claims are never bid on. */
export function biddingOpen(claim: Claim): boolean {
  return (
    claim.status === 'pending_review' &&
    !claim.phase_state &&
    claim.granted_review_agents.length === 0 &&
    claim.granted_parallel_agents.length === 0 &&
    claim.granted_exclusive_agent === ''
  );
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

export type BidScriptOutcome = { ok: true; stdout: string } | { ok: false; reason: string };

export interface BidChoice {
  bid: BidType;
  source: 'script' | 'strategy' | 'llm' | 'default';
  /** Why the script's answer was not used. */
  fallbackReason?: string;
}

/** The bid script's word if valid; else the static strategy; else ignore (seed 000 §8.2 safe default). */
export function chooseBid(script: BidScriptOutcome | undefined, strategy: BidType | undefined): BidChoice {
  let fallbackReason: string | undefined;
  if (script) {
    if (script.ok) {
      const word = script.stdout.trim();
      const parsed = BidType.safeParse(word);
      if (parsed.success) return { bid: parsed.data, source: 'script' };
      fallbackReason = `bid script printed ${JSON.stringify(word.slice(0, 100))}, not one of ${BidType.options.join('|')}`;
    } else {
      fallbackReason = script.reason;
    }
  }
  if (strategy) return { bid: strategy, source: 'strategy', fallbackReason };
  return { bid: 'ignore', source: 'default', fallbackReason };
}
