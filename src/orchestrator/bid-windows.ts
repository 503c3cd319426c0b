/**
 * Each bidder's own bid window: how long a claim waits for its bid. It starts at the Holt's bid
 * timeout (the base) and adapts to the bidder's measured latency, never beyond the Holt's maximum:
 * a late bid widens it at once to 1.5× that bid's latency, on-time bids narrow it slowly back toward
 * 1.5× theirs (never below the base). A slow but alive agent thus loses one claim, not every claim.
 * The decisions are the pure functions below; `BidWindows` only holds the numbers, in memory: a new
 * orchestrator term starts every bidder at the base and learns again from the bids it hears.
 */

export interface WindowBounds {
  /** The Holt's bid timeout: every window's floor, and the window of a bidder never measured. */
  baseMs: number;
  /** The Holt's maximum bid timeout: no window grows past it. */
  maxMs: number;
}

/** Headroom over a measured latency (a bid about as slow again still makes it). */
export const HEADROOM = 1.5;
/** The share of the gap to its target an on-time bid takes off a widened window (slow decay). */
export const DECAY = 0.125;

function clamp(ms: number, b: WindowBounds): number {
  return Math.max(b.baseMs, Math.min(Math.max(b.baseMs, b.maxMs), Math.ceil(ms)));
}

/** A bid `latencyMs` after its claim opened came after the deadline: widen at once. */
export function afterLate(currentMs: number, latencyMs: number, b: WindowBounds): number {
  return clamp(Math.max(currentMs, latencyMs * HEADROOM), b);
}

/**
 * A bid in time: a window too tight for it widens to its target; a wider one moves a step toward
 * it (a bidder late once keeps some slack for a while, then is waited for no longer than needed).
 */
export function afterOnTime(currentMs: number, latencyMs: number, b: WindowBounds): number {
  const target = clamp(latencyMs * HEADROOM, b);
  if (target >= currentMs) return clamp(target, b);
  return clamp(currentMs - Math.max(1, (currentMs - target) * DECAY), b);
}

/** How long a claim waits for `roles` (the bidders it still expects): the widest of their windows. */
export function windowFor(
  roles: readonly string[],
  windows: ReadonlyMap<string, number> | undefined,
  baseMs: number,
): number {
  let ms = baseMs;
  for (const r of roles) ms = Math.max(ms, windows?.get(r) ?? baseMs);
  return ms;
}

/** The windows wider than the base, by role (memory only, one term's observations). */
export class BidWindows {
  readonly #b: WindowBounds;
  readonly #w = new Map<string, number>();

  constructor(bounds: WindowBounds) {
    this.#b = bounds;
  }

  get windows(): ReadonlyMap<string, number> {
    return this.#w;
  }

  late(role: string, latencyMs: number): number {
    return this.#set(role, afterLate(this.#w.get(role) ?? this.#b.baseMs, latencyMs, this.#b));
  }

  onTime(role: string, latencyMs: number): number {
    return this.#set(role, afterOnTime(this.#w.get(role) ?? this.#b.baseMs, latencyMs, this.#b));
  }

  #set(role: string, ms: number): number {
    // Only widened windows are kept: the map holds no more roles than have ever been slow.
    if (ms > this.#b.baseMs) this.#w.set(role, ms);
    else this.#w.delete(role);
    return ms;
  }
}
