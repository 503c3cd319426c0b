/**
 * The grant queue between the claim watcher and the executor (docs/agent-worker.md § The standard pup; Holt's work queue, but
 * deeper than Holt's one): FIFO, bounded, `offer` never blocks. A grant that arrives while a tool runs
 * waits here instead of being dropped; only a full queue refuses one, which stays open on the blackboard
 * for the next re-scan, and the watcher stops bidding while the queue is full (`full`, `room`), so the
 * pup never wins more than it can run.
 */
export class GrantQueue<T> {
  private readonly items: T[] = [];
  private waiter: ((v: T | undefined) => void) | undefined;
  private roomWaiters: (() => void)[] = [];
  private closed = false;
  readonly capacity: number;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error('capacity must be a positive integer');
    this.capacity = capacity;
  }

  get size(): number {
    return this.items.length;
  }

  get full(): boolean {
    return this.items.length >= this.capacity;
  }

  offer(v: T): boolean {
    if (this.closed || this.full) return false;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(v);
    } else {
      this.items.push(v);
    }
    return true;
  }

  /** The oldest item, or undefined once closed. */
  take(): Promise<T | undefined> {
    const v = this.items.shift();
    if (v !== undefined) {
      this.wakeRoom();
      return Promise.resolve(v);
    }
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /** Resolves once the queue has room (at once when it has), or when it is closed. */
  room(): Promise<void> {
    if (!this.full || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** Stops accepting work; a waiting taker gets undefined; queued items are dropped and returned. */
  close(): T[] {
    this.closed = true;
    const dropped = this.items.splice(0);
    this.waiter?.(undefined);
    this.waiter = undefined;
    this.wakeRoom();
    return dropped;
  }

  private wakeRoom(): void {
    const ws = this.roomWaiters;
    this.roomWaiters = [];
    for (const w of ws) w();
  }
}
