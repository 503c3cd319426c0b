import type pg from 'pg';
import { z } from 'zod';

/**
 * The queue as the operator's autoscaler and claim Jobs see it: one worker target's depth, and its
 * pending claims. Queries the inbox offers, so the operator never needs to know its table.
 */

/** A worker target's queue: due pending rows, rows held by a worker, the oldest due row's age. */
export interface TargetDepth {
  pending: number;
  inFlight: number;
  oldestPendingAgeMs: number;
  /** Lease owners (worker pod names) holding a claim now: scale-in spares them. */
  busyWorkers: string[];
}

/**
 * A pending row of a target. `epoch` is the row's turn epoch: every claim of the row by a worker
 * moves it on (and a reclaim or retry leaves the row pending with the new one), so each attempt of a
 * fresh_per_call claim gets its own Job.
 */
export interface PendingClaim {
  claimId: string;
  epoch: number;
}

const DepthRow = z.object({
  pending: z.coerce.number(),
  in_flight: z.coerce.number(),
  oldest_ms: z.coerce.number(),
  busy: z.array(z.string()).nullable(),
});
const PendingRow = z.object({ claim_id: z.string(), turn_epoch: z.coerce.number().int().min(0) });

// Ready rows only (available_at <= now) count as pending; `claimed` rows carry the worker's lease_owner.
const DEPTH = `
SELECT count(*) FILTER (WHERE status = 'pending' AND available_at <= now()) AS pending,
       count(*) FILTER (WHERE status = 'claimed') AS in_flight,
       COALESCE(EXTRACT(EPOCH FROM now() - min(available_at)
         FILTER (WHERE status = 'pending' AND available_at <= now())) * 1000, 0) AS oldest_ms,
       array_agg(DISTINCT lease_owner) FILTER (WHERE status = 'claimed' AND lease_owner IS NOT NULL) AS busy
FROM holt.agent_inbox
WHERE instance = $1 AND worker_target = $2 AND status IN ('pending', 'claimed')`;

const PENDING = `
SELECT DISTINCT ON (claim_id) claim_id, turn_epoch FROM holt.agent_inbox
WHERE instance = $1 AND worker_target = $2 AND status = 'pending' AND available_at <= now()
ORDER BY claim_id, available_at LIMIT $3`;

const PENDING_OF = `
SELECT DISTINCT claim_id, turn_epoch FROM holt.agent_inbox
WHERE instance = $1 AND worker_target = $2 AND status = 'pending' AND claim_id = ANY($3::text[])`;

const pendingRows = (rows: unknown[]): PendingClaim[] =>
  rows.map((x) => {
    const row = PendingRow.parse(x);
    return { claimId: row.claim_id, epoch: row.turn_epoch };
  });

export async function targetDepth(pool: pg.Pool, instance: string, target: string): Promise<TargetDepth> {
  const row = DepthRow.parse((await pool.query(DEPTH, [instance, target])).rows[0]);
  return {
    pending: row.pending,
    inFlight: row.in_flight,
    oldestPendingAgeMs: Math.round(row.oldest_ms),
    busyWorkers: row.busy ?? [],
  };
}

/** Due pending claims of a target, one row each, oldest first, at most `limit`. */
export async function duePendingClaims(
  pool: pg.Pool,
  instance: string,
  target: string,
  limit: number,
): Promise<PendingClaim[]> {
  return pendingRows((await pool.query(PENDING, [instance, target, limit])).rows);
}

/** Which of these claims still have a pending row (due or in back-off), at which epoch. */
export async function pendingClaimsOf(
  pool: pg.Pool,
  instance: string,
  target: string,
  claimIds: string[],
): Promise<PendingClaim[]> {
  if (!claimIds.length) return [];
  return pendingRows((await pool.query(PENDING_OF, [instance, target, claimIds])).rows);
}
