/** The bid poll backs off to at most this multiple of the first poll. */
const MAX_POLL_BACKOFF = 16;

function addTo(m: Map<string, Set<string>>, key: string, value: string): void {
  const set = m.get(key);
  if (set) set.add(value);
  else m.set(key, new Set([value]));
}

/** What a step that decided to wait for bids does next. */
export type AfterWait = { again: true } | { again: false; pollMs: number; newBids: boolean };

/**
 * What the orchestrator knows, between steps, of the bids each claim awaits: the bidders still
 * missing after its last step, those announced (bid_submitted) since, and the bid poll's back-off.
 * Bid events only decide when to step again; a step always decides on the bids it read (pups write
 * a bid before announcing it).
 */
export class BidWatch {
  readonly #firstPollMs: number;
  /** The bidders a claim waiting on its timer still awaits, as its last step saw them. */
  readonly #missing = new Map<string, Set<string>>();
  /** Bidders announced while a claim's step was in flight (that step's read may predate their bid). */
  readonly #duringStep = new Map<string, Set<string>>();
  /**
   * Bidders announced for claims with no step running or due (for a claim just created, the event
   * can be handled before the reply to our own write). Kept until `expireEarly`.
   */
  #early = new Map<string, Set<string>>();
  /** The early bids of the previous generation (kept one more pass, then dropped). */
  #earlier = new Map<string, Set<string>>();
  readonly #bidCount = new Map<string, number>();
  readonly #pollMs = new Map<string, number>();

  constructor(firstPollMs: number) {
    this.#firstPollMs = firstPollMs;
  }

  /**
   * A bid for a claim waiting on its timer: true when it may change the decision (its last awaited
   * bidder, or nothing known), false while other awaited bidders are still missing.
   */
  arrived(id: string, role: string | undefined): boolean {
    const m = this.#missing.get(id);
    if (!m || role === undefined) return true;
    m.delete(role);
    return m.size === 0;
  }

  /**
   * A bid while a step of the claim runs: that step checks it against the bids it read, so a burst
   * of bids costs one more step, not one per bid. False when the event names no bidder: step again.
   */
  duringStep(id: string, role: string | undefined): boolean {
    if (role === undefined) return false;
    addTo(this.#duringStep, id, role);
    return true;
  }

  /** A bid for a claim with no step running or due. */
  beforeStep(id: string, role: string | undefined): void {
    if (role !== undefined) addTo(this.#early, id, role);
  }

  /** Drops the early bids no step took for a whole reconcile interval (called once per pass). */
  expireEarly(): void {
    this.#earlier = this.#early;
    this.#early = new Map();
  }

  /**
   * A step of the claim starts. A step that reads the bids hash sees every bid announced before this
   * point; one that decides without reading (`unread`, a claim just created) counts them as heard.
   */
  stepStarted(id: string, unread: boolean): void {
    this.#missing.delete(id);
    const early = new Set([...(this.#earlier.get(id) ?? []), ...(this.#early.get(id) ?? [])]);
    this.#early.delete(id);
    this.#earlier.delete(id);
    if (unread && early.size) this.#duringStep.set(id, early);
    else this.#duringStep.delete(id);
  }

  /**
   * The step decided to wait for `missing` with `bidCount` bids read. Bidders heard during the step
   * are taken off: none left means step again now (their bids are written); otherwise wait for the
   * rest, with a poll as the backstop for a lost event. The poll starts at the first interval and
   * doubles while polls find no new bid, so a burst of waiting claims is not a storm of reads.
   */
  waited(id: string, bidCount: number, missing: readonly string[]): AfterWait {
    const newBids = bidCount !== this.#bidCount.get(id);
    this.#bidCount.set(id, bidCount);
    const first = this.#firstPollMs;
    const pollMs = newBids ? first : Math.min((this.#pollMs.get(id) ?? first) * 2, first * MAX_POLL_BACKOFF);
    this.#pollMs.set(id, pollMs);
    const left = new Set(missing);
    for (const role of this.#duringStep.get(id) ?? []) left.delete(role);
    this.#duringStep.delete(id);
    if (left.size === 0) return { again: true };
    this.#missing.set(id, left);
    return { again: false, pollMs, newBids };
  }

  /** The claim no longer collects bids (past consensus, dormant or finished). */
  forget(id: string): void {
    this.#missing.delete(id);
    this.#duringStep.delete(id);
    this.#early.delete(id);
    this.#earlier.delete(id);
    this.#bidCount.delete(id);
    this.#pollMs.delete(id);
  }
}
