import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { WorkerExit } from '../blackboard/worker-exits.ts';
import type { RingFn } from '../bus/doorbell.ts';
import type { Logger } from '../common/logger.ts';
import { reclaimExpired } from '../state/head-inbox.ts';
import { InboxRow, type QueueDepth } from '../state/schema.ts';
import { inSpan, markFailed } from '../telemetry/spans.ts';
import { ringsFor } from './policy.ts';
import type { InboxStore } from './store.ts';
import { reclaimSpan, rowContext, rowTraced } from './trace.ts';

// A worker its launcher saw die: the leases it held then end now (a lease taken or renewed after its
// death, by a restarted container of the same pod, is left alone), carrying the report.
const EXITED = `
UPDATE holt.agent_inbox SET lease_expires_at = now() - interval '1 millisecond', worker_exit = $3::jsonb
WHERE instance = $1 AND status = 'claimed' AND lease_owner = $2
  AND updated_at <= to_timestamp($4::double precision / 1000)
RETURNING id`;

export interface SweepOptions {
  instance: string;
  maxAttempts: number;
  ring: RingFn;
  /** Called once per row that failed for good (the orchestrator writes a Failure artefact). */
  onFailed?: (row: InboxRow) => Promise<void>;
  onDepth?: (depths: QueueDepth[]) => void;
  log?: Logger;
  /**
   * Of these Question artefact ids, the ones that have an Answer (the orchestrator asks the blackboard):
   * rows parked on them are woken (pending again) and rung below.
   */
  answered?: (questionIds: string[]) => Promise<string[]>;
  /** Worker deaths reported since the last pass (the launchers' reports, read on from a cursor). */
  exits?: () => Promise<WorkerExit[]>;
  batch?: number;
}

export interface SweepResult {
  /** Leases ended early because their worker was reported dead. */
  exited: number;
  reclaimed: InboxRow[];
  /** Rows parked on a question that got its Answer, or whose wait's deadline passed. */
  woken: number;
  rung: Record<string, number>;
  reported: number;
  /** Stages that failed this pass (each is logged; the others ran all the same). */
  failed: Stage[];
}

export type Stage = 'exits' | 'reclaim' | 'wake' | 'ring' | 'report' | 'depth';

/**
 * One pass of the safety net: take back expired leases, wake rows whose Question has its Answer or
 * whose wait's deadline passed, re-ring due rows (the woken ones among them), report failures, publish depths. The stages are independent (one that fails is
 * logged and the next still runs), and each pages through every row, not only the first batch.
 */
export async function sweep(store: InboxStore, o: SweepOptions): Promise<SweepResult> {
  const batch = o.batch ?? 500;
  const failed: Stage[] = [];
  const stage = async <T>(name: Stage, fallback: T, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (e) {
      failed.push(name);
      o.log?.warn({ event_type: 'watchdog_error', stage: name, error: String(e) }, 'watchdog stage failed');
      return fallback;
    }
  };
  const exited = await stage('exits', 0, () => endExitedLeases(store.pool, o));
  const reclaimed = await stage('reclaim', [] as InboxRow[], () => reclaim(store.pool, o, batch));
  // Deadlines first and on their own: a blackboard that cannot say what is answered delays no timeout.
  const due = await stage('wake', 0, async () => (await store.wakeDue(o.instance, batch)).length);
  const woken = due + (await stage('wake', 0, () => wakeAnswered(store, o, batch)));
  const rung = await stage('ring', {}, () => reRing(store.pool, o));
  const reported = await stage('report', 0, () => reportFailures(store.pool, o, batch));
  const onDepth = o.onDepth;
  if (onDepth) await stage('depth', undefined, async () => onDepth(await store.queueDepth(o.instance)));
  return { exited, reclaimed, woken, rung, reported, failed };
}

/** The leases of workers reported dead end now, so the reclaim below takes their rows at once. */
async function endExitedLeases(pool: pg.Pool, o: SweepOptions): Promise<number> {
  if (!o.exits) return 0;
  let n = 0;
  for (const e of await o.exits()) {
    const r = await pool.query(EXITED, [o.instance, e.owner, JSON.stringify(e), e.at_ms]);
    n += r.rowCount ?? 0;
    if (r.rowCount)
      o.log?.warn(
        {
          event_type: 'worker_exited',
          owner: e.owner,
          role: e.role,
          exit_code: e.exit_code,
          signal: e.signal,
          reason: e.reason,
          inbox_ids: r.rows.map((x: { id: string }) => String(x.id)),
        },
        `worker ${e.owner} exited with code ${e.exit_code} holding ${r.rowCount} row(s)`,
      );
  }
  return n;
}

/**
 * Every expired lease, a batch per statement: the epoch moves on (the worker's fence dies) and the row
 * goes back to pending, or to failed once tried too often (src/state/head-inbox.ts owns the statement).
 * Each row taken back is a `reclaim {target}` span in its claim's trace (src/inbox/trace.ts).
 */
async function reclaim(pool: pg.Pool, o: SweepOptions, batch: number): Promise<InboxRow[]> {
  const out: InboxRow[] = [];
  for (;;) {
    const rows = await reclaimExpired(pool, o.instance, o.maxAttempts, batch);
    // Reclaimed already (committed): a row that does not parse is only left out of the result.
    for (const x of rows) {
      const p = InboxRow.safeParse(x);
      if (!p.success) continue;
      out.push(p.data);
      await traceReclaim(p.data, typeof x.lost_owner === 'string' ? x.lost_owner : undefined);
    }
    if (rows.length < batch) return out;
  }
}

/** The recovery as a span in the row's claim trace; a row without one gets none (no new root trace). */
async function traceReclaim(row: InboxRow, owner: string | undefined): Promise<void> {
  if (!rowTraced(row)) return;
  const { name, attributes, recovery } = reclaimSpan(row, owner);
  await inSpan(name, { attributes, parent: rowContext(row) }, async (span) => markFailed(span, recovery));
}

/** Rows parked on a question whose Answer exists are due again: all of them, a page at a time. */
async function wakeAnswered(store: InboxStore, o: SweepOptions, batch: number): Promise<number> {
  if (!o.answered) return 0;
  let woken = 0;
  let after = 0;
  for (;;) {
    const page = await store.waitingOn(o.instance, batch, after);
    if (page.questions.length)
      woken += (await store.wake(o.instance, await o.answered(page.questions))).length;
    if (page.last === null) return woken;
    after = page.last;
  }
}

// A due row nobody claimed may have lost its doorbell: ring again (one bell per row, capped).
async function reRing(pool: pg.Pool, o: SweepOptions): Promise<Record<string, number>> {
  const due = await pool.query<{ worker_target: string; n: string }>(
    `SELECT worker_target, count(*) AS n FROM holt.agent_inbox
     WHERE instance = $1 AND status = 'pending' AND available_at <= now() GROUP BY worker_target`,
    [o.instance],
  );
  const rung: Record<string, number> = {};
  for (const d of due.rows) {
    const n = ringsFor(Number(d.n));
    for (let i = 0; i < n; i++) o.ring(d.worker_target, 'watchdog');
    rung[d.worker_target] = n;
  }
  return rung;
}

/** Every failed row not yet reported, in id order; one at a time, so one bad row stops nothing. */
async function reportFailures(pool: pg.Pool, o: SweepOptions, batch: number): Promise<number> {
  const onFailed = o.onFailed;
  if (!onFailed) return 0;
  let n = 0;
  let after = 0;
  const reported = (id: unknown) =>
    pool.query('UPDATE holt.agent_inbox SET failure_reported = true WHERE id = $1', [id]);
  for (;;) {
    const r = await pool.query(
      `SELECT * FROM holt.agent_inbox
       WHERE instance = $1 AND status = 'failed' AND NOT failure_reported AND id > $2
       ORDER BY id LIMIT $3`,
      [o.instance, after, batch],
    );
    for (const raw of r.rows) {
      after = Number(raw.id);
      const p = InboxRow.safeParse(raw);
      if (!p.success) {
        // Cannot be reported as a Failure artefact (the row itself is unreadable): say so once, loudly.
        o.log?.error(
          { event_type: 'inbox_row_invalid', inbox_id: String(raw.id), error: p.error.message },
          'failed inbox row does not parse; not reported',
        );
        await reported(raw.id);
        continue;
      }
      try {
        await onFailed(p.data);
      } catch (e) {
        // Left unreported: retried on the next sweep.
        o.log?.warn(
          { event_type: 'failure_report_error', inbox_id: p.data.id, error: String(e) },
          'reporting a failed row failed; retried next sweep',
        );
        continue;
      }
      await reported(p.data.id);
      n++;
    }
    if (r.rows.length < batch) return n;
  }
}

export interface WatchdogOptions extends SweepOptions {
  intervalMs: number;
  /** Every pass's result (metrics, tests). */
  onSweep?: (r: SweepResult) => void;
  /** Sweeps only while this holds (the orchestrator: while it is the leader). */
  active?: () => boolean;
}

/** Runs `sweep` every `intervalMs` until stopped (the orchestrator runs it on its leader only). */
export class Watchdog {
  readonly store: InboxStore;
  readonly opts: WatchdogOptions;
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  constructor(store: InboxStore, opts: WatchdogOptions) {
    this.store = store;
    this.opts = opts;
  }

  start(): void {
    this.abort = new AbortController();
    const signal = this.abort.signal;
    this.loop = (async () => {
      while (!signal.aborted) {
        if (this.opts.active?.() ?? true) await this.sweepOnce();
        await sleep(this.opts.intervalMs, undefined, { signal }).catch(() => undefined);
      }
    })();
  }

  private async sweepOnce(): Promise<void> {
    try {
      const r = await sweep(this.store, this.opts);
      this.opts.onSweep?.(r);
      if (r.reclaimed.length || r.reported || r.woken || r.exited)
        this.opts.log?.info(
          {
            event_type: 'watchdog_sweep',
            reclaimed: r.reclaimed.length,
            woken: r.woken,
            reported: r.reported,
          },
          'watchdog took back expired leases',
        );
    } catch (e) {
      this.opts.log?.warn({ event_type: 'watchdog_error', error: String(e) }, 'watchdog sweep failed');
    }
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }
}
