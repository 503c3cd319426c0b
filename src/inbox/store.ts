import type pg from 'pg';
import { Phase } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import { createPool } from '../common/pg.ts';
import { withTimeout } from '../common/timeout.ts';
import { actorIdOf, turnIdOf } from '../state/ids.ts';
import {
  DepthRow,
  type Fence,
  GrantInput,
  HeadRow,
  InboxRow,
  type QueueDepth,
  TurnRow,
} from '../state/schema.ts';
import { ms, tx } from '../state/sql.ts';
import { afterFailure, type RetryPolicy } from './policy.ts';

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

/** How long the blackboard write of a completion may take while the row is locked (default). */
export const PUBLISH_TIMEOUT_MS = 15_000;

/**
 * For a transaction that holds row locks across a blackboard write: its statements wait at most 5 s
 * for a lock and run at most 10 s, and the server ends the session should it sit idle in the
 * transaction past the publish timeout (a belt to the client-side timer).
 */
export async function boundLocks(c: pg.PoolClient, publishTimeoutMs: number): Promise<void> {
  await c.query(
    `SET LOCAL lock_timeout = '5s'; SET LOCAL statement_timeout = '10s';
     SET LOCAL idle_in_transaction_session_timeout = '${Math.max(1, Math.round(publishTimeoutMs + 5_000))}'`,
  );
}

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
// waits for the Answer (wake) instead of being retried.
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
    attempts = GREATEST(x.attempts - 1, 0)
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

export interface InboxStoreOptions {
  /** Connections in the pool (a worker needs about its concurrency + 2). */
  max?: number;
  log?: Logger;
}

/** The inbox and the turn state in Postgres: every write of an execution is gated by its fence. */
export class InboxStore {
  readonly pool: pg.Pool;
  private rotation = 0;
  private readonly log: Logger | undefined;
  constructor(pool: pg.Pool, log?: Logger) {
    this.pool = pool;
    this.log = log;
  }

  static connect(databaseUrl: string, opts: InboxStoreOptions = {}): InboxStore {
    // A client losing its server must not crash the process; the next query reconnects.
    return new InboxStore(createPool(databaseUrl, { max: opts.max ?? 10 }, opts.log), opts.log);
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  /**
   * Records a grant: the actor's head, the turn and the inbox row, in one transaction. Idempotent
   * per (claim, role, phase): dispatching the same grant again returns the existing row.
   */
  async enqueue(input: GrantInput): Promise<{ created: boolean; row: InboxRow }> {
    const g = GrantInput.parse(input);
    const actor = actorIdOf(g.instance, g.claimId, g.role);
    const turn = turnIdOf(g.instance, g.claimId, g.role, g.phase);
    return tx<{ created: boolean; row: InboxRow }>(this.pool, async (c) => {
      await c.query(
        `INSERT INTO holt.agent_state_head (instance, actor_id, role, worker_target, claim_id)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
        [g.instance, actor, g.role, g.workerTarget, g.claimId],
      );
      const t = await c.query(
        `INSERT INTO holt.agent_turns (turn_id, instance, actor_id, claim_id, role, phase, claim_type)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING turn_id`,
        [turn, g.instance, actor, g.claimId, g.role, g.phase, g.claimType],
      );
      if (!t.rowCount) {
        const old = await c.query('SELECT * FROM holt.agent_inbox WHERE turn_id = $1', [turn]);
        return { value: { created: false, row: InboxRow.parse(old.rows[0]) } };
      }
      const r = await c.query(
        `INSERT INTO holt.agent_inbox (instance, worker_target, actor_id, turn_id, claim_id, role,
           claim_type, phase, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
        [g.instance, g.workerTarget, actor, turn, g.claimId, g.role, g.claimType, g.phase, g.payload],
      );
      // The enqueue mints the turn, never a worker (docs/agent-worker.md § The inbox): the head points at it unless another turn of the actor is active.
      await c.query(
        `UPDATE holt.agent_state_head SET status = 'dispatched', active_turn_id = $3, updated_at = now()
         WHERE instance = $1 AND actor_id = $2 AND active_turn_id IS NULL`,
        [g.instance, actor, turn],
      );
      return { value: { created: true, row: InboxRow.parse(r.rows[0]) } };
    });
  }

  /**
   * A done or failed row whose output is gone from the blackboard (Redis lost data) runs again: due
   * now, its attempts reset, its turn queued and the actor's epoch moved on (any old fence is dead).
   * Returns the reopened row, or null when it was not done or failed.
   */
  async reopen(rowId: string, reason: string): Promise<InboxRow | null> {
    return tx<InboxRow | null>(this.pool, async (c) => {
      const r = await c.query(
        `UPDATE holt.agent_inbox SET status = 'pending', attempts = 0, lease_owner = NULL,
           lease_expires_at = NULL, available_at = now(), updated_at = now(), failure_reported = false,
           last_error = $2
         WHERE id = $1 AND status IN ('done', 'failed') RETURNING *`,
        [rowId, reason],
      );
      if (!r.rowCount) return { value: null };
      const row = InboxRow.parse(r.rows[0]);
      await c.query(
        `UPDATE holt.agent_turns SET status = 'queued', ended_at = NULL, result_artefact_id = NULL, error = $2
         WHERE turn_id = $1`,
        [row.turn_id, reason],
      );
      await c.query(
        `UPDATE holt.agent_state_head SET turn_epoch = turn_epoch + 1, status = 'dispatched',
           active_turn_id = $3, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
         WHERE instance = $1 AND actor_id = $2 AND (active_turn_id IS NULL OR active_turn_id = $3)`,
        [row.instance, row.actor_id, row.turn_id],
      );
      return { value: row };
    });
  }

  /**
   * Claims up to `limit` due rows of `targets` under a lease (FOR UPDATE SKIP LOCKED). One query per
   * target, so each is an ordered scan of the target's due index that stops at the limit.
   */
  async claim(instance: string, targets: string[], owner: string, limit: number, leaseMs: number) {
    const got: InboxRow[] = [];
    // Start at a rotating target so that one busy target cannot starve the others.
    const start = targets.length ? this.rotation % targets.length : 0;
    this.rotation++;
    for (let k = 0; k < targets.length && got.length < limit; k++) {
      const t = targets[(start + k) % targets.length]!;
      const r = await this.pool.query({
        name: 'holt_inbox_claim',
        text: CLAIM,
        values: [instance, t, owner, limit - got.length, ms(leaseMs)],
      });
      got.push(...(await this.parseClaimed(r.rows, owner)));
    }
    return got;
  }

  // The rows are committed as claimed already: a row that does not parse is failed (not thrown), so
  // the others of the batch still run.
  private async parseClaimed(raw: Record<string, unknown>[], owner: string): Promise<InboxRow[]> {
    const good: InboxRow[] = [];
    for (const x of raw) {
      const p = InboxRow.safeParse(x);
      if (p.success) {
        good.push(p.data);
        continue;
      }
      const error = `bad inbox row: ${p.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
      this.log?.error(
        { event_type: 'inbox_row_invalid', inbox_id: String(x.id), error },
        'bad inbox row failed',
      );
      await this.pool.query(FAIL_BAD, [x.id, error, owner]);
    }
    return good;
  }

  /** Claims the due row of one grant (claim, role), for a process started for that claim alone. */
  async claimGrant(instance: string, claimId: string, role: string, owner: string, leaseMs: number) {
    const key = `${claimId}/${role}`;
    const r = await this.pool.query(CLAIM_ONE, [instance, key, owner, 1, ms(leaseMs)]);
    return (await this.parseClaimed(r.rows, owner))[0];
  }

  /**
   * Why a grant has no due row (for the log of an `--execute-claim` that found none): the status of
   * its rows, by turn id (indexed), in any phase. Empty when the grant has no row at all.
   */
  async grantRows(instance: string, claimId: string, role: string): Promise<string[]> {
    const turns = Phase.options.map((p) => turnIdOf(instance, claimId, role, p));
    const r = await this.pool.query<{ phase: string; status: string; why: string | null }>(
      `SELECT phase, status, CASE
         WHEN status = 'claimed' THEN 'held by ' || COALESCE(lease_owner, '?')
         WHEN status = 'pending' AND available_at > now() THEN 'retry backoff'
         WHEN status = 'pending' THEN 'due, held by the active turn of its actor'
         WHEN status = 'waiting' THEN 'parked on ' || COALESCE(waiting_on, '?') END AS why
       FROM holt.agent_inbox WHERE turn_id = ANY($1::uuid[])`,
      [turns],
    );
    return r.rows.map((x) => `${x.phase}: ${x.status}${x.why ? ` (${x.why})` : ''}`);
  }

  /** Extends the leases `owner` still holds; returns the ids it still holds (a missing id = lease lost). */
  async renew(owner: string, fences: Fence[], leaseMs: number): Promise<Set<string>> {
    if (!fences.length) return new Set();
    const r = await this.pool.query(
      // The lease lives on the row alone (the head is written at a turn's boundaries only).
      `UPDATE holt.agent_inbox x SET lease_expires_at = now() + $4::interval, updated_at = now()
       FROM unnest($2::bigint[], $3::bigint[]) AS f(id, epoch)
       WHERE x.id = f.id AND x.turn_epoch = f.epoch AND x.status = 'claimed' AND x.lease_owner = $1
       RETURNING x.id::text`,
      [owner, fences.map((f) => f.inboxId), fences.map((f) => f.epoch), ms(leaseMs)],
    );
    return new Set(r.rows.map((x: { id: string }) => x.id));
  }

  /**
   * Commits the turn under the fence. `publish` (the blackboard write) runs while the fence is held
   * and locked, so nobody can take the claim over in between; a stale fence never reaches it.
   * Returns false, with no side effect, when the fence is stale.
   */
  async complete(
    f: Fence,
    result: { value?: unknown; artefactId?: string; error?: string },
    publish?: () => Promise<void>,
    publishTimeoutMs = PUBLISH_TIMEOUT_MS,
  ): Promise<boolean> {
    const args = [
      ...fenceParams(f),
      JSON.stringify(result.value ?? null),
      result.artefactId ?? null,
      result.error ?? null,
    ];
    // Named: prepared once per connection, this is the hot path.
    const q = { name: 'holt_inbox_complete', text: COMPLETE, values: args };
    if (!publish) return (await this.pool.query(q)).rowCount === 1;
    // The row and the head stay locked while the blackboard is written: bounded, so a hung Redis cannot
    // pin them (the watchdog skips locked rows). A timeout throws: rolled back, the row stays claimed.
    return tx(this.pool, async (c) => {
      await boundLocks(c, publishTimeoutMs);
      if (!(await this.locked(c, f))) return { value: false, rollback: true };
      await withTimeout(publish(), publishTimeoutMs, 'blackboard publish');
      const done = (await c.query(q)).rowCount === 1;
      return { value: done, rollback: !done };
    });
  }

  /**
   * Parks the row on a question (an LLM turn's ask_question): it waits, leaseless and not retried,
   * until `wake` sees an Answer. The fence dies. False when stale.
   */
  async park(f: Fence, questionId: string): Promise<boolean> {
    const r = await this.pool.query(PARK, [...fenceParams(f), questionId]);
    return r.rowCount === 1;
  }

  /** The questions of the waiting rows after `afterId`, a page of `limit` rows (oldest first). */
  async waitingOn(
    instance: string,
    limit = 500,
    afterId = 0,
  ): Promise<{ questions: string[]; last: number | null }> {
    const r = await this.pool.query<{ id: string; waiting_on: string }>(
      `SELECT id, waiting_on FROM holt.agent_inbox
       WHERE instance = $1 AND status = 'waiting' AND waiting_on IS NOT NULL AND id > $3
       ORDER BY id LIMIT $2`,
      [instance, limit, afterId],
    );
    const questions = [...new Set(r.rows.map((x) => x.waiting_on))];
    // A full page: more may follow after its last row.
    return { questions, last: r.rows.length === limit ? Number(r.rows.at(-1)?.id) : null };
  }

  /** Makes the rows waiting on these questions due again; returns the worker target of each woken row. */
  async wake(instance: string, questionIds: string[]): Promise<string[]> {
    if (!questionIds.length) return [];
    const r = await this.pool.query<{ worker_target: string }>(WAKE, [instance, questionIds]);
    return r.rows.map((x) => x.worker_target);
  }

  /** Hands a row back untouched (drain): pending again, the attempt not counted, the fence dead. */
  async release(f: Fence): Promise<boolean> {
    return this.giveBack(f, 'pending', 0, null, -1);
  }

  /** A failed attempt: retried after a backoff, or failed for good (the watchdog reports it). */
  async fail(
    f: Fence,
    attempts: number,
    error: string,
    retryable: boolean,
    policy: RetryPolicy,
  ): Promise<'pending' | 'failed' | 'stale'> {
    const d = afterFailure(attempts, retryable, policy);
    const ok = await this.giveBack(f, d.status, d.status === 'pending' ? d.delayMs : 0, error, 0);
    return ok ? d.status : 'stale';
  }

  private async giveBack(
    f: Fence,
    status: 'pending' | 'failed',
    delayMs: number,
    error: string | null,
    attemptsDelta: number,
  ): Promise<boolean> {
    const r = await this.pool.query(GIVE_BACK, [
      ...fenceParams(f),
      status,
      ms(delayMs),
      error,
      attemptsDelta,
    ]);
    return r.rowCount === 1;
  }

  private async locked(c: pg.PoolClient, f: Fence): Promise<boolean> {
    if (!(await c.query(LOCK_ROW, [f.inboxId, f.owner, f.epoch])).rowCount) return false;
    return (await c.query(LOCK_HEAD, [f.instance, f.actorId, f.epoch, f.turnId])).rowCount === 1;
  }

  /** Pending, in flight and the age of the oldest due pending row, per worker target. */
  async queueDepth(instance: string): Promise<QueueDepth[]> {
    const r = await this.pool.query(
      `SELECT worker_target,
         count(*) FILTER (WHERE status = 'pending') AS pending,
         count(*) FILTER (WHERE status = 'claimed') AS in_flight,
         COALESCE(EXTRACT(EPOCH FROM now() - min(available_at)
           FILTER (WHERE status = 'pending' AND available_at <= now())), 0) AS oldest_pending_seconds
       FROM holt.agent_inbox WHERE instance = $1 AND status IN ('pending', 'claimed')
       GROUP BY worker_target ORDER BY worker_target`,
      [instance],
    );
    return r.rows.map((x) => DepthRow.parse(x));
  }

  // ---- reads (status, tests) ----

  async row(id: string): Promise<InboxRow | null> {
    const r = await this.pool.query('SELECT * FROM holt.agent_inbox WHERE id = $1', [id]);
    return r.rows[0] ? InboxRow.parse(r.rows[0]) : null;
  }

  async head(instance: string, actorId: string): Promise<HeadRow | null> {
    const r = await this.pool.query(
      'SELECT * FROM holt.agent_state_head WHERE instance = $1 AND actor_id = $2',
      [instance, actorId],
    );
    return r.rows[0] ? HeadRow.parse(r.rows[0]) : null;
  }

  async turn(turnId: string): Promise<TurnRow | null> {
    const r = await this.pool.query('SELECT * FROM holt.agent_turns WHERE turn_id = $1', [turnId]);
    return r.rows[0] ? TurnRow.parse(r.rows[0]) : null;
  }
}
