import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Span } from '@opentelemetry/api';
import { subscribeDoorbell } from '../bus/doorbell.ts';
import { type AgentEvents, noAgentEvents, type TaskEvent } from '../bus/events.ts';
import { assertWorkerTarget } from '../bus/subjects.ts';
import { FenceLostError } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import { resultArtefactId } from '../state/ids.ts';
import { type Fence, fenceOf, type InboxRow } from '../state/schema.ts';
import { inSpan, SpanKind } from '../telemetry/spans.ts';
import { acquireTargetLease, releaseTargetLease } from './leases.ts';
import { DEFAULT_RETRY, isSingleConsumer, type RetryPolicy } from './policy.ts';
import type { InboxStore } from './store.ts';
import { attemptSpan, endAttempt, rowContext } from './trace.ts';

export type Outcome = 'done' | 'stale' | 'retry' | 'failed' | 'released' | 'waiting';

export interface WorkerOptions<R> {
  store: InboxStore;
  nc: NatsConnection;
  instance: string;
  targets: string[];
  /** Claims run at once in this process. */
  concurrency: number;
  /** Lease of a claimed row; renewed every `renewEveryMs` (a third of it by default). */
  leaseMs?: number;
  renewEveryMs?: number;
  /** On stop: how long running claims may take before they are released. */
  graceMs?: number;
  retry?: RetryPolicy;
  /** How long `publish` may hold the row locked before the completion is rolled back and retried. */
  publishTimeoutMs?: number;
  owner?: string;
  /** Runs one claim. Must hold no state outside its arguments; `signal` aborts when the lease is lost. */
  execute(row: InboxRow, fence: Fence, signal: AbortSignal): Promise<R>;
  /**
   * Makes the result visible (the blackboard write), called while the fence is held and locked, with
   * the turn's deterministic artefact id: a re-run after a crash writes the same id, i.e. nothing new.
   */
  publish?(row: InboxRow, result: R, artefactId: string): Promise<void>;
  /** The result artefact's id (deterministic per grant); the turn's `resultArtefactId` by default. */
  artefactIdOf?(row: InboxRow): string;
  /**
   * The artefact id the run is parked on (an LLM turn waiting for the Answer to its Question): the row
   * then waits leaseless, without counting the attempt, until the watchdog wakes it. Nothing is published.
   */
  waitingOn?(result: R): string | undefined;
  /** When a parked run stops waiting (its wait's deadline): the watchdog wakes the row then. */
  waitUntilMs?(result: R): number | undefined;
  /** The turn's error when the run delivered a Failure (the turn is recorded `failed`). */
  errorOf?(result: R): string | undefined;
  /** Errors that should not be retried (bad input): the row fails at once. */
  isPermanent?(error: unknown): boolean;
  events?: AgentEvents;
  log?: Logger;
  onOutcome?(row: InboxRow, outcome: Outcome): void;
}

interface Running {
  fence: Fence;
  abort: AbortController;
  lost: boolean;
  released: boolean;
  done: Promise<void>;
  /** The attempt's span (events: the lease lost, the row parked). */
  span?: Span;
}

/**
 * The inbox-driven worker loop: doorbells (a queue group per target) wake it, it claims due rows
 * with SKIP LOCKED under a lease, runs up to `concurrency` of them, renews their leases, and commits
 * each under its fence. Independent of what a claim execution is (the pup plugs in `execute`).
 */
export class InboxWorker<R> {
  readonly opts: WorkerOptions<R>;
  readonly owner: string;
  private readonly leaseMs: number;
  private readonly running = new Map<string, Running>();
  private readonly subs = new Map<string, Subscription>();
  /** stop() was called (it drains once). */
  private stopping = false;
  /** Nothing more is claimed: stopping, or a one-claim `runGrant` run. */
  private claimingStopped = false;
  private filling = false;
  /** The fill in progress: stop() awaits it, so rows its claim query returns are released, not lost. */
  private filled: Promise<void> = Promise.resolve();
  private again = false;
  private timers: NodeJS.Timeout[] = [];

  constructor(opts: WorkerOptions<R>) {
    for (const t of opts.targets) assertWorkerTarget(t);
    this.opts = opts;
    this.owner = opts.owner ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.leaseMs = opts.leaseMs ?? 30_000;
  }

  get inFlight(): number {
    return this.running.size;
  }

  /** Targets this process may consume now (svc1_* only while it holds the target's lease). */
  get activeTargets(): string[] {
    return [...this.subs.keys()];
  }

  async start(): Promise<void> {
    for (const t of this.opts.targets) if (!isSingleConsumer(t)) this.listen(t);
    const single = this.opts.targets.filter(isSingleConsumer);
    if (single.length) {
      await this.holdTargets(single);
      this.timers.push(setInterval(() => void this.holdTargets(single), Math.max(50, this.leaseMs / 3)));
    }
    this.timers.push(
      setInterval(() => void this.renew(), this.opts.renewEveryMs ?? Math.max(50, this.leaseMs / 3)),
    );
    // Work may be waiting from before we started; after that, doorbells (and the watchdog) wake us.
    await this.fill();
  }

  /**
   * Runs the one row of a grant (`--execute-claim`): no doorbells, just this claim under its lease.
   * Resolves with the outcome, or `no_row` when nothing is due for it (done, or held elsewhere).
   */
  async runGrant(claimId: string, role: string): Promise<Outcome | 'no_row'> {
    const row = await this.opts.store.claimGrant(this.opts.instance, claimId, role, this.owner, this.leaseMs);
    if (!row) return 'no_row';
    this.claimingStopped = true; // one claim only: nothing is claimed after it (stop() still drains it)
    const renew = setInterval(
      () => void this.renew(),
      this.opts.renewEveryMs ?? Math.max(50, this.leaseMs / 3),
    );
    try {
      let outcome: Outcome = 'stale';
      this.run(row, (o) => {
        outcome = o;
        this.opts.onOutcome?.(row, o);
      });
      await this.running.get(row.id)?.done;
      return outcome;
    } finally {
      clearInterval(renew);
    }
  }

  private listen(target: string): void {
    if (this.subs.has(target) || this.claimingStopped) return;
    this.subs.set(
      target,
      subscribeDoorbell(this.opts.nc, this.opts.instance, target, () => void this.fill(), this.opts.log),
    );
  }

  // Only the lease holder of a svc1_* target subscribes; a standby keeps trying and takes over on expiry.
  private async holdTargets(targets: string[]): Promise<void> {
    if (this.claimingStopped) return;
    for (const t of targets) {
      const held = await acquireTargetLease(
        this.opts.store.pool,
        this.opts.instance,
        t,
        this.owner,
        this.leaseMs,
      ).catch(() => false);
      if (held && !this.subs.has(t)) {
        this.opts.log?.info(
          { event_type: 'target_lease_acquired', worker_target: t },
          'single-consumer target held',
        );
        this.listen(t);
        void this.fill();
      } else if (!held && this.subs.has(t)) {
        this.subs.get(t)?.unsubscribe();
        this.subs.delete(t);
      }
    }
  }

  /** Claims as long as there is room and work; a bell while claiming makes it look once more. */
  private fill(): Promise<void> {
    if (this.filling) {
      this.again = true;
      return this.filled;
    }
    this.filling = true;
    this.filled = this.fillLoop();
    return this.filled;
  }

  private async fillLoop(): Promise<void> {
    try {
      do {
        this.again = false;
        while (!this.claimingStopped) {
          const room = this.opts.concurrency - this.running.size;
          const targets = this.activeTargets;
          if (room <= 0 || !targets.length) break;
          const rows = await this.opts.store.claim(
            this.opts.instance,
            targets,
            this.owner,
            room,
            this.leaseMs,
          );
          if (this.claimingStopped) {
            // stop() came while the claim query was in flight: hand the rows back untouched.
            await this.giveBackLate(rows);
            break;
          }
          for (const row of rows) this.run(row);
          if (rows.length < room) break;
        }
      } while (this.again && !this.claimingStopped);
    } catch (e) {
      this.opts.log?.warn(
        { event_type: 'claim_error', error: String(e) },
        'claiming failed; waiting for the next bell',
      );
    } finally {
      this.filling = false;
    }
  }

  private run(row: InboxRow, report: (o: Outcome) => void = (o) => this.opts.onOutcome?.(row, o)): void {
    const fence = fenceOf(row);
    const r: Running = {
      fence,
      abort: new AbortController(),
      lost: false,
      released: false,
      done: Promise.resolve(),
    };
    this.running.set(row.id, r);
    r.done = this.fenced(row, r)
      .then(
        (outcome) => report(outcome),
        (e: unknown) =>
          this.opts.log?.error(
            { event_type: 'worker_error', inbox_id: row.id, error: String(e) },
            'claim run failed',
          ),
      )
      .finally(() => {
        this.running.delete(row.id);
        if (!this.claimingStopped) void this.fill();
      });
  }

  /**
   * Runs the row, the one place a lost fence is caught: every fenced write of the store throws
   * FenceLostError, and the run then ends `stale` (another worker owns the row now), having written
   * nothing more.
   */
  private async fenced(row: InboxRow, r: Running): Promise<Outcome> {
    try {
      return await this.execute(row, r);
    } catch (e) {
      if (!(e instanceof FenceLostError)) throw e;
      this.opts.log?.warn(
        { event_type: 'stale_fence', inbox_id: row.id, epoch: r.fence.epoch },
        'lease taken over; result dropped',
      );
      return 'stale';
    }
  }

  /**
   * Gives the row back after a failed attempt (`e`): pending again (retried after a back-off) or
   * failed for good, when `onFailed` reports it. `stored` is the error the row keeps.
   */
  private async attemptFailed(
    row: InboxRow,
    fence: Fence,
    onFailed: () => void,
    e: unknown,
    stored: string,
    retryable: boolean,
    [event_type, message]: [string, string],
  ): Promise<Outcome> {
    const s = await this.opts.store.fail(
      fence,
      row.attempts,
      stored,
      retryable,
      this.opts.retry ?? DEFAULT_RETRY,
    );
    this.opts.log?.warn({ event_type, inbox_id: row.id, next: s, error: String(e) }, message);
    if (s === 'failed') onFailed();
    return s === 'pending' ? 'retry' : s;
  }

  /** One attempt at the row, as a consumer span in its claim's trace (`process {target}`). */
  private execute(row: InboxRow, r: Running): Promise<Outcome> {
    const { name, attributes } = attemptSpan(row, r.fence, this.owner);
    return inSpan(
      name,
      {
        kind: SpanKind.CONSUMER,
        attributes,
        parent: rowContext(row),
        classify: (e) => (e instanceof FenceLostError ? 'fence_lost' : 'worker_error'),
      },
      async (span) => {
        r.span = span;
        const outcome = await this.attempt(row, r);
        endAttempt(span, outcome);
        return outcome;
      },
    );
  }

  private async attempt(row: InboxRow, r: Running): Promise<Outcome> {
    const { fence } = r;
    const ev = this.opts.events ?? noAgentEvents;
    const base = {
      actor_id: row.actor_id,
      turn_id: row.turn_id,
      turn_epoch: fence.epoch,
      claim_id: row.claim_id,
      role: row.role,
    };
    ev.step({ ...base, phase: 'started', at_ms: Date.now() });
    const artefactId = this.opts.artefactIdOf?.(row) ?? resultArtefactId(row.claim_id, row.role, row.turn_id);
    let result: R;
    try {
      result = await this.opts.execute(row, fence, r.abort.signal);
    } catch (e) {
      if (r.lost) return 'stale';
      if (r.released) return 'released';
      if (r.abort.signal.aborted) {
        await this.opts.store.release(fence);
        return 'released';
      }
      const permanent = this.opts.isPermanent?.(e) ?? false;
      return this.attemptFailed(row, fence, () => ev.task(failedTask(base, e)), e, String(e), !permanent, [
        'claim_attempt_failed',
        'claim failed',
      ]);
    }
    if (r.lost) return 'stale';
    if (r.released) return 'released';
    const question = this.opts.waitingOn?.(result);
    if (question) {
      const until = this.opts.waitUntilMs?.(result);
      await this.opts.store.park(fence, question, until);
      r.span?.addEvent('parked', { 'holt.inbox.waiting_on': question });
      this.opts.log?.info(
        { event_type: 'claim_waiting', inbox_id: row.id, waiting_on: question, until_ms: until },
        'parked until the question is answered or its deadline',
      );
      ev.step({ ...base, phase: 'released', at_ms: Date.now() });
      return 'waiting';
    }
    const publish = this.opts.publish;
    try {
      await this.opts.store.complete(
        fence,
        { value: result, artefactId, error: this.opts.errorOf?.(result) },
        publish ? () => publish(row, result, artefactId) : undefined,
        this.opts.publishTimeoutMs,
      );
    } catch (e) {
      if (e instanceof FenceLostError) throw e;
      // The commit was rolled back (a hung or failing blackboard write, a lock timeout): retry the row.
      if (r.lost || r.released) return r.lost ? 'stale' : 'released';
      return this.attemptFailed(
        row,
        fence,
        () => ev.task(failedTask(base, e)),
        e,
        `completion failed: ${String(e)}`,
        true,
        ['complete_failed', 'completion failed; rolled back'],
      );
    }
    ev.step({ ...base, phase: 'completed', at_ms: Date.now() });
    ev.task({ ...base, status: 'success', deliverable_id: artefactId, at_ms: Date.now() });
    return 'done';
  }

  // Renews every held lease in one statement; a lease not renewed was taken: abort that run.
  private async renew(): Promise<void> {
    const all = [...this.running.values()];
    if (!all.length) return;
    try {
      const held = await this.opts.store.renew(
        this.owner,
        all.map((r) => r.fence),
        this.leaseMs,
      );
      for (const r of all)
        if (!held.has(r.fence.inboxId) && this.running.get(r.fence.inboxId) === r && !r.lost) {
          r.lost = true;
          r.span?.addEvent('lease_lost');
          r.abort.abort(new Error('lease lost'));
        }
    } catch (e) {
      this.opts.log?.warn({ event_type: 'renew_error', error: String(e) }, 'lease renewal failed');
    }
  }

  private async giveBackLate(rows: InboxRow[]): Promise<void> {
    for (const row of rows) {
      const released = await this.opts.store.release(fenceOf(row)).then(
        () => true,
        () => false,
      );
      this.opts.log?.info(
        { event_type: 'claim_released_on_stop', inbox_id: row.id, released },
        'claimed while stopping; handed back',
      );
    }
  }

  /** Stops claiming, lets running claims finish within the grace period, then releases the rest. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.claimingStopped = true;
    for (const s of this.subs.values()) s.unsubscribe();
    const held = [...this.subs.keys()].filter(isSingleConsumer);
    this.subs.clear();
    // A claim query in flight now returns rows after this point: the fill releases them; wait for it.
    await this.filled;
    const drained = Promise.allSettled([...this.running.values()].map((r) => r.done));
    const grace = this.opts.graceMs ?? 30_000;
    const timedOut = !(await within(drained, grace));
    if (timedOut) {
      const left = [...this.running.values()];
      // Release first (the fence dies), then abort: a run that ignores the signal can commit nothing.
      for (const r of left) r.released = true;
      await Promise.allSettled(left.map((r) => this.opts.store.release(r.fence)));
      for (const r of left) r.abort.abort(new Error('worker stopping'));
      await within(Promise.allSettled(left.map((r) => r.done)), 1000);
    }
    for (const t of this.timers) clearInterval(t);
    for (const t of held)
      await releaseTargetLease(this.opts.store.pool, this.opts.instance, t, this.owner).catch(
        () => undefined,
      );
  }
}

/** Whether `p` settled within `ms` (the timer is cancelled either way: it must not hold the process). */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  const ac = new AbortController();
  try {
    return await Promise.race([
      p.then(() => true),
      sleep(ms, false, { signal: ac.signal }).catch(() => false),
    ]);
  } finally {
    ac.abort();
  }
}

/** The task event of a claim that failed for good. */
function failedTask(
  base: Omit<TaskEvent, 'status' | 'deliverable_id' | 'error' | 'at_ms'>,
  e: unknown,
): TaskEvent {
  return { ...base, status: 'failed', deliverable_id: null, error: String(e), at_ms: Date.now() };
}
