import type pg from 'pg';
import { createPool } from '../../common/pg.ts';
import { duePendingClaims, type PendingClaim, pendingClaimsOf, targetDepth } from '../../inbox/backlog.ts';
import { endpointKey, endpointOf, type StoreEndpoint } from '../kube/endpoint.ts';

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

export type { PendingClaim };

/** Pending claims of a target (fresh_per_call agents get one Job per claim and attempt). */
export interface ClaimSource {
  pendingClaims(t: BacklogTarget, limit: number): Promise<PendingClaim[]>;
  /** Which of these claims still have a pending row (due or in back-off), at which epoch. */
  pendingOf(t: BacklogTarget, claimIds: string[]): Promise<PendingClaim[]>;
}

/** Resolves a Holt's DATABASE_URL (from its `-app` Secret or the external one). */
export type DatabaseUrlResolver = (t: { namespace: string; holt: string }) => Promise<StoreEndpoint>;

/** Backlog from each Holt's Postgres inbox, one small pool per Holt. */
export class PostgresBacklogReader implements BacklogReader, ClaimSource {
  readonly #resolve: DatabaseUrlResolver;
  readonly #pools = new Map<string, { url: string; pool: pg.Pool }>();

  constructor(resolve: DatabaseUrlResolver) {
    this.#resolve = resolve;
  }

  async depth(t: BacklogTarget): Promise<Backlog> {
    return targetDepth(await this.#pool(t), t.holt, t.target);
  }

  async pendingClaims(t: BacklogTarget, limit: number): Promise<PendingClaim[]> {
    return duePendingClaims(await this.#pool(t), t.holt, t.target, limit);
  }

  async pendingOf(t: BacklogTarget, claimIds: string[]): Promise<PendingClaim[]> {
    return pendingClaimsOf(await this.#pool(t), t.holt, t.target, claimIds);
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
