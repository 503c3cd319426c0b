import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { RingFn } from '../bus/doorbell.ts';
import type { Logger } from '../common/logger.ts';
import { ringsFor } from './policy.ts';
import { InboxRow, type QueueDepth } from './schema.ts';
import type { InboxStore } from './store.ts';

// Expired leases: the worker is gone or partitioned. The epoch moves on (its fence dies) and the row
// goes back to pending, or to failed once it has been tried too often (a row that kills its workers).
const RECLAIM = `
WITH x AS (
  SELECT id, actor_id, turn_id, attempts >= $2 AS exhausted FROM holt.agent_inbox
  WHERE instance = $1 AND status = 'claimed' AND lease_expires_at < now()
  ORDER BY lease_expires_at LIMIT $3 FOR UPDATE SKIP LOCKED
), h AS (
  UPDATE holt.agent_state_head h
  SET turn_epoch = h.turn_epoch + 1, lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
      status = CASE WHEN x.exhausted THEN 'idle' ELSE 'dispatched' END,
      active_turn_id = CASE WHEN x.exhausted THEN NULL ELSE h.active_turn_id END
  FROM x WHERE h.instance = $1 AND h.actor_id = x.actor_id AND h.active_turn_id = x.turn_id
), t AS (
  UPDATE holt.agent_turns t
  SET status = CASE WHEN x.exhausted THEN 'failed' ELSE 'queued' END,
      error = CASE WHEN x.exhausted THEN 'lease expired too often' ELSE t.error END,
      ended_at = CASE WHEN x.exhausted THEN now() END
  FROM x WHERE t.turn_id = x.turn_id
)
UPDATE holt.agent_inbox i
SET status = CASE WHEN x.exhausted THEN 'failed' ELSE 'pending' END, lease_owner = NULL,
    lease_expires_at = NULL, available_at = now(), updated_at = now(),
    last_error = 'lease expired: worker lost'
FROM x WHERE i.id = x.id
RETURNING i.*`;

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
  batch?: number;
}

export interface SweepResult {
  reclaimed: InboxRow[];
  /** Rows parked on a question that got its Answer. */
  woken: number;
  rung: Record<string, number>;
  reported: number;
}

/** One pass of the safety net: take back expired leases, re-ring due rows, report failures. */
export async function sweep(store: InboxStore, o: SweepOptions): Promise<SweepResult> {
  const r = await store.pool.query(RECLAIM, [o.instance, o.maxAttempts, o.batch ?? 500]);
  // Reclaimed already (committed): a row that does not parse is only left out of the result.
  const reclaimed = r.rows.flatMap((x) => {
    const p = InboxRow.safeParse(x);
    return p.success ? [p.data] : [];
  });
  let woken = 0;
  if (o.answered) {
    const waiting = await store.waitingOn(o.instance, o.batch ?? 500);
    if (waiting.length) woken = (await store.wake(o.instance, await o.answered(waiting))).length;
  }
  const rung = await reRing(store.pool, o);
  let reported = 0;
  if (o.onFailed) reported = await reportFailures(store.pool, o.instance, o.onFailed, o.batch ?? 500, o.log);
  if (o.onDepth) o.onDepth(await store.queueDepth(o.instance));
  return { reclaimed, woken, rung, reported };
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

async function reportFailures(
  pool: pg.Pool,
  instance: string,
  onFailed: (row: InboxRow) => Promise<void>,
  limit: number,
  log?: Logger,
): Promise<number> {
  const r = await pool.query(
    `SELECT * FROM holt.agent_inbox WHERE instance = $1 AND status = 'failed' AND NOT failure_reported
     ORDER BY id LIMIT $2`,
    [instance, limit],
  );
  let n = 0;
  const reported = (id: unknown) =>
    pool.query('UPDATE holt.agent_inbox SET failure_reported = true WHERE id = $1', [id]);
  // One row at a time: a bad row or a failing report is logged and the sweep goes on with the others.
  for (const raw of r.rows) {
    const p = InboxRow.safeParse(raw);
    if (!p.success) {
      // Cannot be reported as a Failure artefact (the row itself is unreadable): say so once, loudly.
      log?.error(
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
      log?.warn(
        { event_type: 'failure_report_error', inbox_id: p.data.id, error: String(e) },
        'reporting a failed row failed; retried next sweep',
      );
      continue;
    }
    await reported(p.data.id);
    n++;
  }
  return n;
}

export interface WatchdogOptions extends SweepOptions {
  intervalMs: number;
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
      if (r.reclaimed.length || r.reported || r.woken)
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
