import { FenceLostError } from '../common/errors.ts';
import type { Queryable } from './head.ts';
import type { Fence } from './schema.ts';
import { ms } from './sql.ts';

/**
 * The statements that move an actor's head and turn together with its inbox row (src/inbox), each one
 * statement so that the gate and the writes are atomic. With head.ts, the only code that writes
 * holt.agent_state_head and holt.agent_turns. Fenced ones throw FenceLostError when zero rows matched.
 */

// A claimed row that does not parse (schema drift, a hand-edited row) fails for good, its actor freed:
// the rest of the batch runs, and the watchdog reports it.
const FAIL_BAD = `
WITH i AS (
  UPDATE holt.agent_inbox SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL,
         last_error = $2, updated_at = now()
  WHERE id = $1 AND status = 'claimed' AND lease_owner = $3
  RETURNING instance, actor_id, turn_id
)
UPDATE holt.agent_state_head h SET status = 'idle', active_turn_id = NULL, lease_owner = NULL,
       lease_expires_at = NULL, turn_epoch = h.turn_epoch + 1, updated_at = now()
FROM i WHERE h.instance = i.instance AND h.actor_id = i.actor_id AND h.active_turn_id = i.turn_id`;

// Claim: due rows of our targets, skipping rows others hold. Only the row is written: the fencing token
// is the actor's epoch as the head holds it, copied onto the row. A claim needs no new epoch, since every
// way back from claimed to pending (give-back, reclaim, park and wake, reopen) moves the head's epoch on.
// The head is written only where a turn starts whose enqueue found another turn of the actor active
// (minted); otherwise it already names this turn. svc1_* rows only go to the holder of the target lease.
// (In one statement the final UPDATE reads the head as it was before `minted`: hence the join on both.)
const CLAIM = `
WITH picked AS (
  SELECT i.id, i.actor_id, i.turn_id FROM holt.agent_inbox i
  WHERE i.instance = $1 AND i.worker_target = $2 AND i.status = 'pending'
    AND i.available_at <= now()
    -- a scalar subquery (not NOT EXISTS): stays a per-row filter on the ordered index scan
    AND COALESCE((SELECT b.active_turn_id FROM holt.agent_state_head b WHERE b.instance = i.instance
                  AND b.actor_id = i.actor_id), i.turn_id) = i.turn_id
    AND (i.worker_target NOT LIKE 'svc1\\_%' OR EXISTS (
          SELECT 1 FROM holt.target_leases l WHERE l.instance = i.instance
          AND l.worker_target = i.worker_target AND l.owner = $3 AND l.expires_at > now()))
  ORDER BY i.available_at, i.id
  LIMIT $4
  FOR UPDATE OF i SKIP LOCKED
), minted AS (
  UPDATE holt.agent_state_head h
  SET status = 'dispatched', active_turn_id = p.turn_id, updated_at = now()
  FROM picked p
  WHERE h.instance = $1 AND h.actor_id = p.actor_id AND h.active_turn_id IS NULL
  RETURNING h.turn_epoch, p.id AS inbox_id
)
UPDATE holt.agent_inbox i
SET status = 'claimed', attempts = i.attempts + 1, lease_owner = $3,
    lease_expires_at = now() + $5::interval, turn_epoch = COALESCE(m.turn_epoch, h.turn_epoch),
    updated_at = now()
FROM picked p
JOIN holt.agent_state_head h ON h.instance = $1 AND h.actor_id = p.actor_id
LEFT JOIN minted m ON m.inbox_id = p.id
WHERE i.id = p.id AND (h.active_turn_id = p.turn_id OR m.inbox_id IS NOT NULL)
RETURNING i.*`;

// `--execute-claim`: the one row of (claim, role), whatever its target (for fresh_per_call Jobs).
const CLAIM_ONE = CLAIM.replace(
  'i.worker_target = $2 AND',
  "i.claim_id = split_part($2, '/', 1) AND i.role = split_part($2, '/', 2) AND",
);

// The fence check shared by every write of an execution: our lease on the row, our epoch on the head.
// The row is locked first (the watchdog skips locked rows), then the head.
// Parameters of every fenced statement: $1 row id, $2 lease owner, $3 epoch, $4 instance, $5 actor, $6 turn.
const fenceParams = (f: Fence) => [f.inboxId, f.owner, f.epoch, f.instance, f.actorId, f.turnId];
const fencedRow = (cols: string) => `SELECT ${cols} FROM holt.agent_inbox WHERE id = $1 AND status = 'claimed'
  AND lease_owner = $2 AND turn_epoch = $3 FOR UPDATE`;
const HEAD_FENCE = 'h.instance = $4 AND h.actor_id = $5 AND h.turn_epoch = $3 AND h.active_turn_id = $6';
const LOCK_ROW = fencedRow('1');
const LOCK_HEAD = `SELECT 1 FROM holt.agent_state_head WHERE instance = $1 AND actor_id = $2
  AND turn_epoch = $3 AND active_turn_id = $4 AND status IN ('dispatched', 'running', 'suspended') FOR UPDATE`;

// Completion: one statement, so the gate and the writes are atomic. Zero rows = stale fence.
const COMPLETE = `
WITH i AS (
  ${fencedRow('id, updated_at')}
), h AS (
  UPDATE holt.agent_state_head h SET status = 'idle', active_turn_id = NULL, lease_owner = NULL,
         lease_expires_at = NULL, updated_at = now()
  FROM i WHERE ${HEAD_FENCE}
    AND h.status IN ('dispatched', 'running', 'suspended')
  RETURNING h.actor_id
), t AS (
  UPDATE holt.agent_turns t SET status = CASE WHEN $9::text IS NULL THEN 'done' ELSE 'failed' END,
         result = $7::jsonb, result_artefact_id = $8, error = $9::text, turn_epoch = $3, started_at = COALESCE(t.started_at, (SELECT updated_at FROM i)), ended_at = now()
  FROM h WHERE t.turn_id = $6
)
UPDATE holt.agent_inbox x SET status = 'done', lease_owner = NULL, lease_expires_at = NULL,
       updated_at = now()
FROM h, i WHERE x.id = i.id
RETURNING x.id`;

// Giving a row back (drain, lost run, failure): the epoch moves on so the old fence dies.
const GIVE_BACK = `
WITH i AS (
  ${fencedRow('id')}
), h AS (
  UPDATE holt.agent_state_head h
  SET turn_epoch = h.turn_epoch + 1, lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
      status = CASE WHEN $7::text = 'failed' THEN 'idle' ELSE 'dispatched' END,
      active_turn_id = CASE WHEN $7::text = 'failed' THEN NULL ELSE h.active_turn_id END
  FROM i WHERE ${HEAD_FENCE}
  RETURNING h.actor_id
), t AS (
  UPDATE holt.agent_turns t SET status = CASE WHEN $7::text = 'failed' THEN 'failed' ELSE 'queued' END,
         error = COALESCE($9::text, t.error), ended_at = CASE WHEN $7::text = 'failed' THEN now() END
  FROM h WHERE t.turn_id = $6
)
UPDATE holt.agent_inbox x
SET status = $7::text, lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    available_at = now() + $8::interval, last_error = COALESCE($9::text, x.last_error),
    attempts = x.attempts + $10::int
FROM h, i WHERE x.id = i.id
RETURNING x.id`;

// Parking a turn on a question: no lease, the fence dead (epoch+1), the attempt not counted; the row
// waits for the Answer (wake) instead of being retried. A waiting row's available_at is its wait's
// deadline ($7 ms, or 'infinity' when it has none): WAKE_DUE wakes it then, so the turn resumes to its
// timeout (every reader of available_at as "due" also asks for status 'pending').
const PARK = `
WITH i AS (
  ${fencedRow('id')}
), h AS (
  UPDATE holt.agent_state_head h
  SET turn_epoch = h.turn_epoch + 1, status = 'suspended', lease_owner = NULL, lease_expires_at = NULL,
      updated_at = now()
  FROM i WHERE ${HEAD_FENCE}
  RETURNING h.actor_id
)
UPDATE holt.agent_inbox x
SET status = 'waiting', waiting_on = $7, lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    attempts = GREATEST(x.attempts - 1, 0),
    available_at = COALESCE(to_timestamp($8::double precision / 1000), 'infinity'::timestamptz)
FROM h, i WHERE x.id = i.id
RETURNING x.id`;

// An Answer exists: the waiting rows on those questions are due again (the caller rings their targets).
const WAKE = `
WITH w AS (
  UPDATE holt.agent_inbox x SET status = 'pending', waiting_on = NULL, available_at = now(), updated_at = now()
  WHERE x.instance = $1 AND x.status = 'waiting' AND x.waiting_on = ANY($2::text[])
  RETURNING x.actor_id, x.turn_id, x.worker_target
), h AS (
  UPDATE holt.agent_state_head h SET status = 'dispatched', updated_at = now()
  FROM w WHERE h.instance = $1 AND h.actor_id = w.actor_id AND h.active_turn_id = w.turn_id
)
SELECT worker_target FROM w`;

// Waits past their deadline (an approval or a question nobody answered in time): due again exactly as
// WAKE makes them, a batch at a time; the resumed turn sees the deadline passed and times the wait out.
const WAKE_DUE = `
WITH x AS (
  SELECT id FROM holt.agent_inbox
  WHERE instance = $1 AND status = 'waiting' AND available_at <= now()
  ORDER BY available_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), w AS (
  UPDATE holt.agent_inbox i SET status = 'pending', waiting_on = NULL, available_at = now(), updated_at = now()
  FROM x WHERE i.id = x.id
  RETURNING i.actor_id, i.turn_id, i.worker_target
), h AS (
  UPDATE holt.agent_state_head h SET status = 'dispatched', updated_at = now()
  FROM w WHERE h.instance = $1 AND h.actor_id = w.actor_id AND h.active_turn_id = w.turn_id
)
SELECT worker_target FROM w`;

// Expired leases: the worker is gone or partitioned. The epoch moves on (its fence dies) and the row
// goes back to pending, or to failed once it has been tried too often (a row that kills its workers).
const RECLAIM = `
WITH x AS (
  SELECT id, actor_id, turn_id, lease_owner AS owner, attempts >= $2 AS exhausted FROM holt.agent_inbox
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
    last_error = CASE WHEN i.worker_exit->>'owner' = x.owner
      THEN 'worker exited with code ' || (i.worker_exit->>'exit_code') ELSE 'lease expired: worker lost' END,
    -- The report stays with the row only when it is about the worker that just lost it.
    worker_exit = CASE WHEN i.worker_exit->>'owner' = x.owner THEN i.worker_exit END
FROM x WHERE i.id = x.id
RETURNING i.*, x.owner AS lost_owner`;

type Rows = Promise<Record<string, unknown>[]>;

/** Claims up to `limit` due rows of one target under a lease (raw rows: the caller parses them). */
export async function claimRows(
  q: Queryable,
  a: { instance: string; target: string; owner: string; limit: number; leaseMs: number },
): Rows {
  // Named: prepared once per connection, this is the hot path.
  const r = await q.query({
    name: 'holt_inbox_claim',
    text: CLAIM,
    values: [a.instance, a.target, a.owner, a.limit, ms(a.leaseMs)],
  });
  return r.rows;
}

/** Claims the due row of one grant (claim, role), whatever its target (raw rows). */
export async function claimGrantRow(
  q: Queryable,
  a: { instance: string; claimId: string; role: string; owner: string; leaseMs: number },
): Rows {
  const r = await q.query(CLAIM_ONE, [a.instance, `${a.claimId}/${a.role}`, a.owner, 1, ms(a.leaseMs)]);
  return r.rows;
}

/** Fails a claimed row that does not parse, its actor's head freed (epoch + 1). */
export async function failUnreadable(q: Queryable, id: unknown, error: string, owner: string): Promise<void> {
  await q.query(FAIL_BAD, [id, error, owner]);
}

/**
 * Locks the row, then the head, under the fence, for the rest of the transaction (a publish runs under
 * them); FenceLostError when either moved on.
 */
export async function lockInboxFence(q: Queryable, f: Fence): Promise<void> {
  if (!(await q.query(LOCK_ROW, [f.inboxId, f.owner, f.epoch])).rowCount) throw new FenceLostError();
  const h = await q.query(LOCK_HEAD, [f.instance, f.actorId, f.epoch, f.turnId]);
  if (h.rowCount !== 1) throw new FenceLostError();
}

/** Commits the turn: row done, head idle, turn done or failed. FenceLostError when stale. */
export async function completeInboxTurn(
  q: Queryable,
  f: Fence,
  result: { value?: unknown; artefactId?: string; error?: string },
): Promise<void> {
  const values = [
    ...fenceParams(f),
    JSON.stringify(result.value ?? null),
    result.artefactId ?? null,
    result.error ?? null,
  ];
  // Named: prepared once per connection, this is the hot path.
  const r = await q.query({ name: 'holt_inbox_complete', text: COMPLETE, values });
  if (r.rowCount !== 1) throw new FenceLostError();
}

/**
 * Gives the row back (pending after `delayMs`, or failed for good), the epoch moved on so the fence
 * dies. FenceLostError when stale.
 */
export async function giveBackInboxTurn(
  q: Queryable,
  f: Fence,
  a: { status: 'pending' | 'failed'; delayMs: number; error: string | null; attemptsDelta: number },
): Promise<void> {
  const r = await q.query(GIVE_BACK, [...fenceParams(f), a.status, ms(a.delayMs), a.error, a.attemptsDelta]);
  if (r.rowCount !== 1) throw new FenceLostError();
}

/**
 * Parks the row on a question: waiting, leaseless, the head suspended and its fence dead; woken by the
 * Answer, or at `wakeAtMs` (the wait's deadline) when given.
 */
export async function parkInboxTurn(
  q: Queryable,
  f: Fence,
  questionId: string,
  wakeAtMs?: number,
): Promise<void> {
  const at = wakeAtMs !== undefined && Number.isFinite(wakeAtMs) ? wakeAtMs : null;
  const r = await q.query(PARK, [...fenceParams(f), questionId, at]);
  if (r.rowCount !== 1) throw new FenceLostError();
}

/** Rows waiting on these questions are due again, their heads dispatched; each woken row's target. */
export async function wakeInboxTurns(
  q: Queryable,
  instance: string,
  questionIds: string[],
): Promise<string[]> {
  const r = await q.query<{ worker_target: string }>(WAKE, [instance, questionIds]);
  return r.rows.map((x) => x.worker_target);
}

/** Wakes up to `batch` waiting rows whose deadline passed, their heads dispatched; each woken row's target. */
export async function wakeDueInboxTurns(q: Queryable, instance: string, batch: number): Promise<string[]> {
  const r = await q.query<{ worker_target: string }>(WAKE_DUE, [instance, batch]);
  return r.rows.map((x) => x.worker_target);
}

/**
 * Takes back up to `batch` expired leases (epoch + 1); the rows as they are now (raw), each with the
 * owner that lost it as `lost_owner`.
 */
export async function reclaimExpired(
  q: Queryable,
  instance: string,
  maxAttempts: number,
  batch: number,
): Rows {
  const r = await q.query(RECLAIM, [instance, maxAttempts, batch]);
  return r.rows;
}

/**
 * A done or failed row reopened (its output lost): its turn queued again and the actor's epoch moved on
 * (any old fence is dead), the head naming the turn unless another one is active.
 */
export async function reopenInboxTurn(
  q: Queryable,
  t: { instance: string; actorId: string; turnId: string },
  reason: string,
): Promise<void> {
  await q.query(
    `UPDATE holt.agent_turns SET status = 'queued', ended_at = NULL, result_artefact_id = NULL, error = $2
     WHERE turn_id = $1`,
    [t.turnId, reason],
  );
  await q.query(
    `UPDATE holt.agent_state_head SET turn_epoch = turn_epoch + 1, status = 'dispatched',
       active_turn_id = $3, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
     WHERE instance = $1 AND actor_id = $2 AND (active_turn_id IS NULL OR active_turn_id = $3)`,
    [t.instance, t.actorId, t.turnId],
  );
}
