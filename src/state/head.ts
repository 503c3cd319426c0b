import type pg from 'pg';
import { FenceLostError } from '../common/errors.ts';
import type { Fence } from './schema.ts';
import { ms } from './sql.ts';

/**
 * The one owner of an actor's head (holt.agent_state_head) and of its turns (holt.agent_turns): every
 * statement that writes them is here or in head-inbox.ts (those that move an inbox row in the same
 * statement). Callers keep their transactions and call these in order; a fenced write that finds its
 * fence gone throws FenceLostError, caught once where the turn runs. The contract: docs/agent-worker.md.
 */

/** A pool or a client in a transaction. */
export type Queryable = Pick<pg.Pool, 'query'>;

/** Who the head row is: made once per actor, never changed after. */
export interface HeadKey {
  instance: string;
  actorId: string;
  role: string;
  workerTarget: string;
  claimId: string;
}

/** A turn row as minted: what it answers (claim, role, phase). */
export interface TurnKey {
  turnId: string;
  instance: string;
  actorId: string;
  claimId: string;
  role: string;
  phase: string;
  claimType: string;
}

/** One actor's turn: the head to move and the turn it names. */
export interface TurnRef {
  instance: string;
  actorId: string;
  turnId: string;
}

/** A lease on a turn for `owner`, for `leaseMs`. */
export interface LeaseAsk extends TurnRef {
  owner: string;
  leaseMs: number;
}

/** Makes the actor's head if it has none (idle, epoch 0); an existing head is left as it is. */
export async function ensureHead(q: Queryable, h: HeadKey): Promise<void> {
  await q.query(
    `INSERT INTO holt.agent_state_head (instance, actor_id, role, worker_target, claim_id)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
    [h.instance, h.actorId, h.role, h.workerTarget, h.claimId],
  );
}

/** Mints the turn (queued) if it does not exist; true when this call made it (idempotent per turn id). */
export async function ensureTurn(q: Queryable, t: TurnKey): Promise<boolean> {
  const r = await q.query(
    `INSERT INTO holt.agent_turns (turn_id, instance, actor_id, claim_id, role, phase, claim_type)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING turn_id`,
    [t.turnId, t.instance, t.actorId, t.claimId, t.role, t.phase, t.claimType],
  );
  return (r.rowCount ?? 0) > 0;
}

/**
 * A life turn, minted running (src/life): its id is new by construction (the life's sequence), so a
 * conflict is a bug and throws.
 */
export async function insertLifeTurn(
  q: Queryable,
  t: { turnId: string; instance: string; actorId: string; claimId: string; role: string },
): Promise<void> {
  await q.query(
    `INSERT INTO holt.agent_turns (turn_id, instance, actor_id, claim_id, role, phase, claim_type, status, started_at)
     VALUES ($1, $2, $3, $4, $5, 'life', 'life', 'running', now())`,
    [t.turnId, t.instance, t.actorId, t.claimId, t.role],
  );
}

/**
 * The enqueue mints the turn, never a worker (docs/agent-worker.md § The inbox): the head points at it
 * unless another turn of the actor is active (a claim of a later row then makes it active).
 */
export async function pointIdleHeadAt(q: Queryable, t: TurnRef): Promise<void> {
  await q.query(
    `UPDATE holt.agent_state_head SET status = 'dispatched', active_turn_id = $3, updated_at = now()
     WHERE instance = $1 AND actor_id = $2 AND active_turn_id IS NULL`,
    [t.instance, t.actorId, t.turnId],
  );
}

/** The turn's status, its row locked for the rest of the transaction (acquire decides on it). */
export async function lockTurnStatus(q: Queryable, turnId: string): Promise<string | undefined> {
  const r = await q.query<{ status: string }>(
    'SELECT status FROM holt.agent_turns WHERE turn_id = $1 FOR UPDATE',
    [turnId],
  );
  return r.rows[0]?.status;
}

const epochOf = (r: pg.QueryResult<{ turn_epoch: string }>) =>
  r.rowCount ? Number(r.rows[0]!.turn_epoch) : null;

// The lease may be taken when nobody holds it, its holder's lease has lapsed (a dead holder's fence
// then dies with the new epoch), or the asker holds it already (a restart of the same owner).
const LEASE_FREE = '(lease_owner IS NULL OR lease_expires_at < now() OR lease_owner = $4)';

/**
 * A standard pup takes (or resumes) a claim's turn under a lease: the head must be idle or already name
 * this turn. The new epoch, or null when another live holder has it (busy).
 */
export async function leaseTurn(q: Queryable, a: LeaseAsk): Promise<number | null> {
  const r = await q.query<{ turn_epoch: string }>(
    `UPDATE holt.agent_state_head SET status = 'running', active_turn_id = $3, turn_epoch = turn_epoch + 1,
       lease_owner = $4, lease_expires_at = now() + $5::interval, updated_at = now()
     WHERE instance = $1 AND actor_id = $2 AND (active_turn_id IS NULL OR active_turn_id = $3)
       AND ${LEASE_FREE}
     RETURNING turn_epoch`,
    [a.instance, a.actorId, a.turnId, a.owner, ms(a.leaseMs)],
  );
  return epochOf(r);
}

/** A leased turn runs: its row carries the epoch it runs under (started once, kept on a resume). */
export async function markTurnRunning(q: Queryable, turnId: string, epoch: number): Promise<void> {
  await q.query(
    `UPDATE holt.agent_turns SET status = 'running', turn_epoch = $2, started_at = COALESCE(started_at, now())
     WHERE turn_id = $1`,
    [turnId, epoch],
  );
}

/**
 * A life turn whose lease lapsed (or that waits on results now in) resumes: the head must still name
 * it. The new epoch, or null when a live holder has it (lost the race).
 */
export async function resumeLease(q: Queryable, a: LeaseAsk): Promise<number | null> {
  const r = await q.query<{ turn_epoch: string }>(
    `UPDATE holt.agent_state_head SET status = 'running', turn_epoch = turn_epoch + 1, lease_owner = $4,
       lease_expires_at = now() + $5::interval, updated_at = now()
     WHERE instance = $1 AND actor_id = $2 AND active_turn_id = $3
       AND ${LEASE_FREE}
     RETURNING turn_epoch`,
    [a.instance, a.actorId, a.turnId, a.owner, ms(a.leaseMs)],
  );
  return epochOf(r);
}

/** A new life turn is leased on an idle head. The new epoch, or null when the head is busy. */
export async function beginLease(q: Queryable, a: LeaseAsk): Promise<number | null> {
  const r = await q.query<{ turn_epoch: string }>(
    `UPDATE holt.agent_state_head SET status = 'running', active_turn_id = $3, turn_epoch = turn_epoch + 1,
       lease_owner = $4, lease_expires_at = now() + $5::interval, updated_at = now()
     WHERE instance = $1 AND actor_id = $2 AND active_turn_id IS NULL RETURNING turn_epoch`,
    [a.instance, a.actorId, a.turnId, a.owner, ms(a.leaseMs)],
  );
  return epochOf(r);
}

// A leased turn's fence: the head still names this turn at this epoch, leased to this owner.
const LEASED = `instance = $1 AND actor_id = $2 AND turn_epoch = $3 AND active_turn_id = $4
  AND lease_owner = $5`;
const leasedArgs = (f: Fence) => [f.instance, f.actorId, f.epoch, f.turnId, f.owner];

/** Extends a leased turn's lease; FenceLostError when someone took the turn over. */
export async function renewLease(q: Queryable, f: Fence, leaseMs: number): Promise<void> {
  const r = await q.query(
    `UPDATE holt.agent_state_head SET lease_expires_at = now() + $6::interval WHERE ${LEASED}`,
    [...leasedArgs(f), ms(leaseMs)],
  );
  if (r.rowCount !== 1) throw new FenceLostError('turn lease lost');
}

/**
 * Gives a leased turn's lease up, the turn still active: `suspended` (waits on a question or on
 * tool results), `dispatched` (a shutdown: resumed later). FenceLostError when the fence is gone.
 */
export async function releaseLease(
  q: Queryable,
  f: Fence,
  status: 'suspended' | 'dispatched',
): Promise<void> {
  const r = await q.query(
    `UPDATE holt.agent_state_head SET status = $6, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
     WHERE ${LEASED}`,
    [...leasedArgs(f), status],
  );
  if (r.rowCount !== 1) throw new FenceLostError();
}

/**
 * Locks the head of a leased turn for the rest of the transaction (a publish runs under it, so a
 * holder that lost its lease can neither publish nor commit); FenceLostError when the fence is gone.
 */
export async function lockLease(q: Queryable, f: Fence): Promise<void> {
  const r = await q.query(`SELECT 1 FROM holt.agent_state_head WHERE ${LEASED} FOR UPDATE`, leasedArgs(f));
  if (!r.rowCount) throw new FenceLostError();
}

/**
 * Ends a leased turn under its fence: the head idle (its epoch kept: the next turn bumps it), the turn
 * done or failed with its result. FenceLostError, with nothing written, when the fence is gone.
 */
export async function endLease(
  q: Queryable,
  f: Fence,
  end: { status: 'done' | 'failed'; result?: unknown; error?: string; artefactId?: string },
): Promise<void> {
  const h = await q.query(
    `UPDATE holt.agent_state_head SET status = 'idle', active_turn_id = NULL, lease_owner = NULL,
       lease_expires_at = NULL, updated_at = now() WHERE ${LEASED} RETURNING 1`,
    leasedArgs(f),
  );
  if (!h.rowCount) throw new FenceLostError();
  await q.query(
    `UPDATE holt.agent_turns SET status = $2, result = $3::jsonb, error = $4, result_artefact_id = $5,
       turn_epoch = $6, ended_at = now() WHERE turn_id = $1`,
    [
      f.turnId,
      end.status,
      JSON.stringify(end.result ?? null),
      end.error ?? null,
      end.artefactId ?? null,
      f.epoch,
    ],
  );
}

/**
 * A turn whose deliverable is on the blackboard but which never committed (its holder died between
 * the two): closed as done, its head idle and its fence dead. True when there was one to close.
 */
export async function closeDelivered(q: Queryable, t: TurnRef, artefactId: string): Promise<boolean> {
  const r = await q.query(
    `UPDATE holt.agent_turns SET status = 'done', result_artefact_id = $2, ended_at = now(),
       error = 'closed on resume: its artefact was published before the turn committed'
     WHERE turn_id = $1 AND status NOT IN ('done', 'failed') RETURNING 1`,
    [t.turnId, artefactId],
  );
  if (!r.rowCount) return false;
  await q.query(
    `UPDATE holt.agent_state_head SET status = 'idle', active_turn_id = NULL, lease_owner = NULL,
       lease_expires_at = NULL, turn_epoch = turn_epoch + 1, updated_at = now()
     WHERE instance = $1 AND actor_id = $2 AND active_turn_id = $3`,
    [t.instance, t.actorId, t.turnId],
  );
  return true;
}

/**
 * A finished turn whose deliverable is gone from the blackboard (Redis lost data): queued again and the
 * actor's epoch moved on, so any old fence is dead. True when there was one to reopen.
 */
export async function reopenFinished(q: Queryable, t: TurnRef, reason: string): Promise<boolean> {
  const r = await q.query(
    `UPDATE holt.agent_turns SET status = 'queued', ended_at = NULL, result_artefact_id = NULL, error = $2
     WHERE turn_id = $1 AND status IN ('done', 'failed') RETURNING 1`,
    [t.turnId, reason],
  );
  if (!r.rowCount) return false;
  await q.query(
    `UPDATE holt.agent_state_head SET turn_epoch = turn_epoch + 1, updated_at = now()
     WHERE instance = $1 AND actor_id = $2`,
    [t.instance, t.actorId],
  );
  return true;
}
