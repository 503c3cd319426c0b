import { BidType, type Claim } from '../blackboard/types.ts';

/** Pure decisions of the pup: when to bid and what to bid (grants and output ids: blackboard/grants.ts). */

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

/**
 * Whether a claim open for bidding still waits for `role`'s bid: any live one does; a dormant one
 * only when it went dormant with `role` silent (its pup was not up), as then the bid re-opens it.
 */
export function awaitsBidFrom(claim: Claim, role: string): boolean {
  return !claim.dormant_reason || (claim.silent_agents?.includes(role) ?? false);
}

export type BidScriptOutcome = { ok: true; stdout: string } | { ok: false; reason: string };

export interface BidChoice {
  bid: BidType;
  source: 'script' | 'strategy' | 'llm' | 'default';
  /** Why the script's answer was not used. */
  fallbackReason?: string;
}

/** The bid script's word if valid; else the static strategy; else ignore (the safe default: docs/protocol.md row 28). */
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
