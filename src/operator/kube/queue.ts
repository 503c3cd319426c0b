import { backoffMs } from '../../common/backoff.ts';

/** What a reconcile asks of the queue: nothing (done), or a timed re-check. Throwing = retry with backoff. */
export type ReconcileResult = { requeueAfterMs?: number } | undefined;

export interface WorkQueueOptions {
  /** Keys processed at once (never the same key twice at once). */
  concurrency?: number;
  /** First retry delay after an error; doubles per consecutive failure of the key. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /**
   * A run still going after this long gives up its slot (the key stays exclusive until it ends, and
   * runs again then): one call that never returns must not stall every other key. Default 60 s.
   */
  slotTimeoutMs?: number;
  onResult?: (key: string, result: 'success' | 'requeue' | 'error', error?: unknown) => void;
  /** A run gave up its slot (slotTimeoutMs). */
  onSlow?: (key: string, ms: number) => void;
}

/**
 * A keyed work queue as client-go's: a burst of adds for one key becomes one run (dedupe), a key is
 * never processed by two workers at once (an add while it runs marks it dirty and it runs again
 * after), errors retry with per-key exponential backoff, and `requeueAfterMs` schedules re-checks.
 */
export class WorkQueue {
  readonly #handler: (key: string) => Promise<ReconcileResult>;
  readonly #concurrency: number;
  readonly #base: number;
  readonly #max: number;
  readonly #onResult: WorkQueueOptions['onResult'];
  readonly #onSlow: WorkQueueOptions['onSlow'];
  readonly #slotTimeout: number;
  /** Runs that hold a slot (a slow run still in #processing holds none). */
  #slots = 0;
  readonly #queue: string[] = [];
  readonly #queued = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  #running = false;
  #idleWaiters: (() => void)[] = [];

  constructor(handler: (key: string) => Promise<ReconcileResult>, opts: WorkQueueOptions = {}) {
    this.#handler = handler;
    this.#concurrency = opts.concurrency ?? 4;
    this.#base = opts.baseDelayMs ?? 5;
    this.#max = opts.maxDelayMs ?? 300_000;
    this.#onResult = opts.onResult;
    this.#onSlow = opts.onSlow;
    this.#slotTimeout = opts.slotTimeoutMs ?? 60_000;
  }

  /** Keys waiting (not those running or scheduled for later). */
  depth(): number {
    return this.#queue.length;
  }

  add(key: string): void {
    if (this.#processing.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    this.#queue.push(key);
    this.#pump();
  }

  /** Adds the key after `ms`; an earlier schedule of the same key wins. */
  addAfter(key: string, ms: number): void {
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const prev = this.#timers.get(key);
    if (prev && prev.at <= at) return;
    if (prev) clearTimeout(prev.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.#timers.set(key, { at, timer });
  }

  /** Backoff delay of the key's next retry: base · 2^failures, capped. */
  backoffMs(key: string): number {
    const n = this.#failures.get(key) ?? 0;
    return backoffMs(n, { baseMs: this.#base, maxMs: this.#max, jitter: 'none' });
  }

  start(): void {
    this.#running = true;
    this.#pump();
  }

  /** Stops taking keys; resolves when the running ones finish. Scheduled re-checks are dropped. */
  async stop(): Promise<void> {
    this.#running = false;
    for (const t of this.#timers.values()) clearTimeout(t.timer);
    this.#timers.clear();
    await this.idle();
  }

  /** Nothing running and nothing queued right now (scheduled re-checks aside). */
  isIdle(): boolean {
    return this.#processing.size === 0 && this.#queue.length === 0;
  }

  /** Resolves when nothing is running (and, while started, nothing is queued). */
  idle(): Promise<void> {
    if (this.#processing.size === 0 && (!this.#running || this.#queue.length === 0)) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #pump(): void {
    while (this.#running && this.#slots < this.#concurrency && this.#queue.length > 0) {
      const key = this.#queue.shift() as string;
      this.#queued.delete(key);
      this.#processing.add(key);
      this.#slots++;
      void this.#run(key);
    }
    if (this.#processing.size === 0 && (!this.#running || this.#queue.length === 0)) {
      const w = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const f of w) f();
    }
  }

  async #run(key: string): Promise<void> {
    let holdsSlot = true;
    const slow = setTimeout(() => {
      holdsSlot = false;
      this.#slots--;
      // It runs again once this run ends: what it was doing may not have finished.
      this.#dirty.add(key);
      this.#onSlow?.(key, this.#slotTimeout);
      this.#pump();
    }, this.#slotTimeout);
    slow.unref();
    try {
      const r = await this.#handler(key);
      this.#failures.delete(key);
      if (r?.requeueAfterMs !== undefined) {
        this.#onResult?.(key, 'requeue');
        this.addAfter(key, r.requeueAfterMs);
      } else {
        this.#onResult?.(key, 'success');
      }
    } catch (e) {
      const delay = this.backoffMs(key);
      this.#failures.set(key, (this.#failures.get(key) ?? 0) + 1);
      this.#onResult?.(key, 'error', e);
      if (this.#running) this.addAfter(key, delay);
    } finally {
      clearTimeout(slow);
      if (holdsSlot) this.#slots--;
      this.#processing.delete(key);
      if (this.#dirty.delete(key)) this.add(key);
      this.#pump();
    }
  }
}
