import type { BidType, ClaimType, Phase } from '../blackboard/types.ts';
import { BID_TYPES } from '../blackboard/types.ts';

/** Byte-wise order of UTF-8 strings (Go's sort.Strings), not JS's UTF-16 order. */
export function byteCompare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

export function sortRoles(roles: Iterable<string>): string[] {
  return [...roles].sort(byteCompare);
}

/** The grant type announced for a phase (a parallel grant is Holt's "claim"). */
export const CLAIM_TYPE: Record<Phase, ClaimType> = {
  review: 'review',
  parallel: 'claim',
  exclusive: 'exclusive',
};
const BID_FOR: Record<Phase, BidType> = { review: 'review', parallel: 'claim', exclusive: 'exclusive' };
const ORDER: Phase[] = ['review', 'parallel', 'exclusive'];

/** A raw bid value as stored; anything outside the enum counts as `ignore` (Holt's invalid_bid). */
export function sanitiseBid(raw: string | undefined): { bid: BidType; invalid: boolean } {
  if (raw === undefined) return { bid: 'ignore', invalid: false };
  return (BID_TYPES as readonly string[]).includes(raw)
    ? { bid: raw as BidType, invalid: false }
    : { bid: 'ignore', invalid: true };
}

/** Roles that bid for `phase`, byte-wise sorted so grants are deterministic. */
export function biddersFor(phase: Phase, bids: Record<string, BidType>): string[] {
  return sortRoles(Object.keys(bids).filter((r) => bids[r] === BID_FOR[phase]));
}

/** The first phase after `after` (or the first overall) with at least one bidder; null = dormant. */
export function nextPhase(bids: Record<string, BidType>, after?: Phase): Phase | null {
  const from = after ? ORDER.indexOf(after) + 1 : 0;
  for (const p of ORDER.slice(from)) if (biddersFor(p, bids).length) return p;
  return null;
}

/** Roles granted in a phase: every bidder, except exclusive where the byte-wise first wins. */
export function grantees(phase: Phase, bids: Record<string, BidType>): string[] {
  const roles = biddersFor(phase, bids);
  return phase === 'exclusive' ? roles.slice(0, 1) : roles;
}
