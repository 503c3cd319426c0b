import type pg from 'pg';
import { FenceLostError } from '../common/errors.ts';
import { ms } from '../state/sql.ts';

/**
 * The lease that makes one process the only consumer of a `svc1_*` target. Acquire also renews:
 * the holder extends it; anyone else gets it only once it has expired (standby take-over).
 */
export async function acquireTargetLease(
  pool: pg.Pool,
  instance: string,
  target: string,
  owner: string,
  ttlMs: number,
): Promise<boolean> {
  const r = await pool.query(
    `INSERT INTO holt.target_leases (instance, worker_target, owner, expires_at)
     VALUES ($1, $2, $3, now() + $4::interval)
     ON CONFLICT (instance, worker_target) DO UPDATE
       SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
       WHERE holt.target_leases.owner = EXCLUDED.owner OR holt.target_leases.expires_at <= now()
     RETURNING owner`,
    [instance, target, owner, ms(ttlMs)],
  );
  return r.rowCount === 1;
}

export async function releaseTargetLease(
  pool: pg.Pool,
  instance: string,
  target: string,
  owner: string,
): Promise<void> {
  await pool.query(
    'DELETE FROM holt.target_leases WHERE instance = $1 AND worker_target = $2 AND owner = $3',
    [instance, target, owner],
  );
}

/**
 * Keeps a turn's lease while it runs: renewed every third of its length; `onLost` when a renewal finds
 * it gone (FenceLostError: someone else runs the turn now), `onError` when one fails otherwise (the
 * next one tries again). Returns the function that stops it.
 */
export function renewWhileRunning(
  leaseMs: number,
  renew: () => Promise<void>,
  onLost: () => void,
  onError: (e: unknown) => void,
): () => void {
  const t = setInterval(
    () => {
      renew().catch((e: unknown) => (e instanceof FenceLostError ? onLost() : onError(e)));
    },
    Math.max(100, Math.floor(leaseMs / 3)),
  );
  return () => clearInterval(t);
}
