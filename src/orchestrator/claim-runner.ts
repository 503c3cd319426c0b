import { backoffDelay } from '../common/backoff.ts';

export interface StepOutcome {
  /** Decide again at once (after a write or a compare-and-set conflict). */
  again?: boolean;
  /** Decide again at this time (ms) unless something kicks the claim earlier. */
  wakeAt?: number;
}

// A claim that keeps writing without settling is parked on a timer rather than spinning.
const MAX_STEPS_PER_RUN = 25;

/**
 * Runs the steps of many claims concurrently, each claim strictly one step at a time: a kick while a
 * step runs marks the claim dirty so it is decided once more with fresh state. This is what keeps one
 * slow claim (an agent that never bids) from delaying any other.
 */
export class ClaimRunner {
  private readonly step: (id: string) => Promise<StepOutcome>;
  private readonly onError: (id: string, e: unknown) => void;
  private readonly running = new Map<string, { dirty: boolean }>();
  private readonly timers = new Map<string, { at: number; t: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private readonly inflight = new Set<Promise<void>>();
  private stopped = false;

  constructor(step: (id: string) => Promise<StepOutcome>, onError: (id: string, e: unknown) => void) {
    this.step = step;
    this.onError = onError;
  }

  kick(id: string): void {
    if (this.stopped) return;
    const r = this.running.get(id);
    if (r) {
      r.dirty = true;
      return;
    }
    this.clearTimer(id);
    const state = { dirty: true };
    this.running.set(id, state);
    const p: Promise<void> = this.loop(id, state).finally(() => {
      // The loop may have handed the claim to a timer and a new run may already own it.
      if (this.running.get(id) === state) this.running.delete(id);
      this.inflight.delete(p);
    });
    this.inflight.add(p);
  }

  /** Kick `id` at `at` (ms since epoch); an earlier pending wake-up wins. */
  wakeAt(id: string, at: number): void {
    if (this.stopped) return;
    const cur = this.timers.get(id);
    if (cur && cur.at <= at) return;
    if (cur) clearTimeout(cur.t);
    const t = setTimeout(
      () => {
        this.timers.delete(id);
        this.kick(id);
      },
      Math.max(0, at - Date.now()),
    );
    this.timers.set(id, { at, t });
  }

  /** Kicks every claim the runner owns: those on a timer step now, those stepping once more. */
  kickAll(): void {
    for (const id of [...this.timers.keys(), ...this.running.keys()]) this.kick(id);
  }

  /** Running or waiting on a timer: the runner already owns its next step. */
  busy(id: string): boolean {
    return this.running.has(id) || this.timers.has(id);
  }

  /** A step of `id` is in flight (a kick now only marks it to be decided once more). */
  stepping(id: string): boolean {
    return this.running.has(id);
  }

  get size(): number {
    return this.running.size;
  }

  /** Stops scheduling; `drain` waits for the steps in flight. */
  async stop(drain = true): Promise<void> {
    this.stopped = true;
    for (const { t } of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    if (drain) await Promise.allSettled([...this.inflight]);
  }

  private clearTimer(id: string): void {
    const cur = this.timers.get(id);
    if (cur) clearTimeout(cur.t);
    this.timers.delete(id);
  }

  private async loop(id: string, state: { dirty: boolean }): Promise<void> {
    let steps = 0;
    while (state.dirty && !this.stopped) {
      state.dirty = false;
      if (++steps > MAX_STEPS_PER_RUN) {
        this.running.delete(id);
        this.wakeAt(id, Date.now() + 100);
        return;
      }
      try {
        const o = await this.step(id);
        this.failures.delete(id);
        if (o.again) state.dirty = true;
        else if (o.wakeAt !== undefined && !state.dirty) {
          this.running.delete(id);
          this.wakeAt(id, o.wakeAt);
        }
      } catch (e) {
        if (this.stopped) return;
        this.onError(id, e);
        const n = (this.failures.get(id) ?? 0) + 1;
        this.failures.set(id, n);
        this.running.delete(id);
        this.wakeAt(id, Date.now() + 50 + backoffDelay(n, 100, 5_000));
        return;
      }
    }
  }
}
