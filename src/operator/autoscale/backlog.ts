import type pg from 'pg';
import { z } from 'zod';
import { createPool } from '../../common/pg.ts';
import { endpointKey, endpointOf, type StoreEndpoint } from '../runtime/endpoint.ts';

/** Which queue: a Holt (its own Postgres) and one worker target in it. */
export interface BacklogTarget {
  namespace: string;
  holt: string;
  target: string;
}

export interface Backlog {
  pending: number;
  inFlight: number;
  oldestPendingAgeMs: number;
  /** Lease owners (worker pod names) holding a claim now: scale-in spares them. */
  busyWorkers?: string[];
}

/** Reads a worker target's queue depth (the autoscaler's only metric). */
export interface BacklogReader {
  depth(t: BacklogTarget): Promise<Backlog>;
  close?(): Promise<void>;
}

/**
 * A pending inbox row of a fresh_per_call target. `epoch` is the row's turn epoch: every claim of
 * the row by a worker moves it on (and a reclaim or retry leaves the row pending with the new one),
 * so each attempt gets its own Job.
 */
export interface PendingClaim {
  claimId: string;
  epoch: number;
}

/** Pending claims of a target (fresh_per_call agents get one Job per claim and attempt). */
export interface ClaimSource {
  pendingClaims(t: BacklogTarget, limit: number): Promise<PendingClaim[]>;
  /** Which of these claims still have a pending row (due or in back-off), at which epoch. */
  pendingOf(t: BacklogTarget, claimIds: string[]): Promise<PendingClaim[]>;
}

/** Resolves a Holt's DATABASE_URL (from its `-app` Secret or the external one). */
export type DatabaseUrlResolver = (t: { namespace: string; holt: string }) => Promise<StoreEndpoint>;

const DepthRow = z.object({
  pending: z.coerce.number(),
  in_flight: z.coerce.number(),
  oldest_ms: z.coerce.number(),
  busy: z.array(z.string()).nullable(),
});

const PendingRow = z.object({ claim_id: z.string(), turn_epoch: z.coerce.number().int().min(0) });

// The inbox engineer's table (src/inbox): holt.agent_inbox, one row per grant; `claimed` rows carry
// the worker's lease_owner. Ready rows only (available_at <= now) count as pending.
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

/** Backlog from each Holt's Postgres inbox, one small pool per Holt. */
export class PostgresBacklogReader implements BacklogReader, ClaimSource {
  readonly #resolve: DatabaseUrlResolver;
  readonly #pools = new Map<string, { url: string; pool: pg.Pool }>();

  constructor(resolve: DatabaseUrlResolver) {
    this.#resolve = resolve;
  }

  async depth(t: BacklogTarget): Promise<Backlog> {
    const pool = await this.#pool(t);
    const r = await pool.query(DEPTH, [t.holt, t.target]);
    const row = DepthRow.parse(r.rows[0]);
    return {
      pending: row.pending,
      inFlight: row.in_flight,
      oldestPendingAgeMs: Math.round(row.oldest_ms),
      busyWorkers: row.busy ?? [],
    };
  }

  async pendingClaims(t: BacklogTarget, limit: number): Promise<PendingClaim[]> {
    const pool = await this.#pool(t);
    const r = await pool.query(PENDING, [t.holt, t.target, limit]);
    return r.rows.map((x) => {
      const row = PendingRow.parse(x);
      return { claimId: row.claim_id, epoch: row.turn_epoch };
    });
  }

  async pendingOf(t: BacklogTarget, claimIds: string[]): Promise<PendingClaim[]> {
    if (!claimIds.length) return [];
    const pool = await this.#pool(t);
    const r = await pool.query(PENDING_OF, [t.holt, t.target, claimIds]);
    return r.rows.map((x) => {
      const row = PendingRow.parse(x);
      return { claimId: row.claim_id, epoch: row.turn_epoch };
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.pool.end()));
    this.#pools.clear();
  }

  async #pool(t: BacklogTarget): Promise<pg.Pool> {
    const key = `${t.namespace}/${t.holt}`;
    const endpoint = await this.#resolve(t);
    const url = endpointKey(endpoint);
    const have = this.#pools.get(key);
    if (have?.url === url) return have.pool;
    if (have) await have.pool.end();
    const { url: pgUrl, ca } = endpointOf(endpoint);
    const pool = createPool(pgUrl, {
      max: 2,
      connectionTimeoutMillis: 2_000,
      idleTimeoutMillis: 30_000,
      ...(ca ? { ssl: { ca } } : {}),
    });
    this.#pools.set(key, { url, pool });
    return pool;
  }
}
