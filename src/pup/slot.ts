/**
 * The work queue of size one between the claim watcher and the executor (seed 000 §8.1). `offer` never
 * blocks, so the watcher keeps bidding while a task runs; a refused grant is not lost, it stays on the
 * blackboard without output and the next re-scan offers it again.
 */
export class WorkSlot<T> {
  private item: T | undefined;
  private waiter: ((v: T | undefined) => void) | undefined;
  private closed = false;

  get full(): boolean {
    return this.item !== undefined;
  }

  offer(v: T): boolean {
    if (this.closed || this.item !== undefined) return false;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(v);
    } else {
      this.item = v;
    }
    return true;
  }

  /** The next item, or undefined once closed. */
  take(): Promise<T | undefined> {
    if (this.item !== undefined) {
      const v = this.item;
      this.item = undefined;
      return Promise.resolve(v);
    }
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  /** Stops accepting work; a waiting taker gets undefined; a queued item is dropped and returned. */
  close(): T | undefined {
    this.closed = true;
    const dropped = this.item;
    this.item = undefined;
    this.waiter?.(undefined);
    this.waiter = undefined;
    return dropped;
  }
}
