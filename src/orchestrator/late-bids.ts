import { LRUCache } from 'lru-cache';

/** How long, and for how many claims, a closed consensus remembers its silent bidders. */
const REMEMBER_MS = 3600_000;
const MAX_CLAIMS = 10_000;

/**
 * The bidders each consensus closed without (the bid timeout counted them as `ignore`), so a bid that
 * turns up afterwards is reported by name (`bid_late`) instead of vanishing. Memory only: a new
 * term does not report the late bids of an older one's decisions.
 */
export class LateBids {
  readonly #silent = new LRUCache<string, { roles: Set<string>; deadlineMs: number; startMs: number }>({
    max: MAX_CLAIMS,
    ttl: REMEMBER_MS,
  });

  /** Consensus on `claimId`, open since `startMs`, closed at its deadline without `roles`. */
  closedWithout(claimId: string, roles: string[], deadlineMs: number, startMs = deadlineMs): void {
    if (roles.length) this.#silent.set(claimId, { roles: new Set(roles), deadlineMs, startMs });
  }

  /**
   * A bid was heard: how late it is and how long after bidding opened it came (its bidder's measured
   * latency), once per silent bidder; null for any other bid.
   */
  heard(
    claimId: string,
    role: string | undefined,
    nowMs: number,
  ): { lateByMs: number; latencyMs: number } | null {
    const e = this.#silent.get(claimId);
    if (!e || role === undefined || !e.roles.delete(role)) return null;
    if (!e.roles.size) this.#silent.delete(claimId);
    return { lateByMs: Math.max(0, nowMs - e.deadlineMs), latencyMs: Math.max(0, nowMs - e.startMs) };
  }
}
