import type pg from 'pg';
import { Phase } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import { createPool } from '../common/pg.ts';
import { withTimeout } from '../common/timeout.ts';
import { ensureHead, ensureTurn, pointIdleHeadAt } from '../state/head.ts';
import {
  claimGrantRow,
  claimRows,
  completeInboxTurn,
  failUnreadable,
  giveBackInboxTurn,
  lockInboxFence,
  parkInboxTurn,
  reopenInboxTurn,
  wakeDueInboxTurns,
  wakeInboxTurns,
} from '../state/head-inbox.ts';
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

export interface InboxStoreOptions {
  /** Connections in the pool (a worker needs about its concurrency + 2). */
  max?: number;
  log?: Logger;
}

/**
 * The inbox and the turn state in Postgres: every write of an execution is gated by its fence. The
 * statements that move the actor's head and turn live in src/state/head.ts and head-inbox.ts (their one
 * owner); this store keeps the transactions and the rows of the inbox alone. A lost fence throws
 * FenceLostError (caught once, where the worker runs the row).
 */
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
      await ensureHead(c, {
        instance: g.instance,
        actorId: actor,
        role: g.role,
        workerTarget: g.workerTarget,
        claimId: g.claimId,
      });
      const minted = await ensureTurn(c, {
        turnId: turn,
        instance: g.instance,
        actorId: actor,
        claimId: g.claimId,
        role: g.role,
        phase: g.phase,
        claimType: g.claimType,
      });
      if (!minted) {
        const old = await c.query('SELECT * FROM holt.agent_inbox WHERE turn_id = $1', [turn]);
        return { value: { created: false, row: InboxRow.parse(old.rows[0]) } };
      }
      const r = await c.query(
        `INSERT INTO holt.agent_inbox (instance, worker_target, actor_id, turn_id, claim_id, role,
           claim_type, phase, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
        [g.instance, g.workerTarget, actor, turn, g.claimId, g.role, g.claimType, g.phase, g.payload],
      );
      await pointIdleHeadAt(c, { instance: g.instance, actorId: actor, turnId: turn });
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
      await reopenInboxTurn(
        c,
        { instance: row.instance, actorId: row.actor_id, turnId: row.turn_id },
        reason,
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
      const rows = await claimRows(this.pool, {
        instance,
        target: t,
        owner,
        limit: limit - got.length,
        leaseMs,
      });
      got.push(...(await this.parseClaimed(rows, owner)));
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
      await failUnreadable(this.pool, x.id, error, owner);
    }
    return good;
  }

  /** Claims the due row of one grant (claim, role), for a process started for that claim alone. */
  async claimGrant(instance: string, claimId: string, role: string, owner: string, leaseMs: number) {
    const rows = await claimGrantRow(this.pool, { instance, claimId, role, owner, leaseMs });
    return (await this.parseClaimed(rows, owner))[0];
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
         WHEN status = 'waiting' THEN 'parked on ' || COALESCE(waiting_on, '?')
           || CASE WHEN available_at < 'infinity' THEN ' until ' || available_at::text ELSE '' END
         END AS why
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
   * FenceLostError, with no side effect, when the fence is stale.
   */
  async complete(
    f: Fence,
    result: { value?: unknown; artefactId?: string; error?: string },
    publish?: () => Promise<void>,
    publishTimeoutMs = PUBLISH_TIMEOUT_MS,
  ): Promise<void> {
    if (!publish) return completeInboxTurn(this.pool, f, result);
    // The row and the head stay locked while the blackboard is written: bounded, so a hung Redis cannot
    // pin them (the watchdog skips locked rows). A throw (a timeout, a lost fence) rolls back: the row
    // stays claimed.
    await tx(this.pool, async (c) => {
      await boundLocks(c, publishTimeoutMs);
      await lockInboxFence(c, f);
      await withTimeout(publish(), publishTimeoutMs, 'blackboard publish');
      await completeInboxTurn(c, f, result);
      return { value: undefined };
    });
  }

  /**
   * Parks the row on a question (an LLM turn's ask_question or approval): it waits, leaseless and not
   * retried, until `wake` sees an Answer or, with `wakeAtMs` (the wait's deadline), until `wakeDue`
   * runs past it. The fence dies. FenceLostError when stale.
   */
  park(f: Fence, questionId: string, wakeAtMs?: number): Promise<void> {
    return parkInboxTurn(this.pool, f, questionId, wakeAtMs);
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
    return wakeInboxTurns(this.pool, instance, questionIds);
  }

  /**
   * Makes the waiting rows whose deadline passed due again (every one, a batch per statement); returns
   * the worker target of each woken row.
   */
  async wakeDue(instance: string, batch = 500): Promise<string[]> {
    const out: string[] = [];
    for (;;) {
      const got = await wakeDueInboxTurns(this.pool, instance, batch);
      out.push(...got);
      if (got.length < batch) return out;
    }
  }

  /**
   * Hands a row back untouched (drain): pending again, the attempt not counted, the fence dead.
   * FenceLostError when stale.
   */
  release(f: Fence): Promise<void> {
    return giveBackInboxTurn(this.pool, f, { status: 'pending', delayMs: 0, error: null, attemptsDelta: -1 });
  }

  /**
   * A failed attempt: retried after a backoff, or failed for good (the watchdog reports it).
   * FenceLostError when stale.
   */
  async fail(
    f: Fence,
    attempts: number,
    error: string,
    retryable: boolean,
    policy: RetryPolicy,
  ): Promise<'pending' | 'failed'> {
    const d = afterFailure(attempts, retryable, policy);
    const delayMs = d.status === 'pending' ? d.delayMs : 0;
    await giveBackInboxTurn(this.pool, f, { status: d.status, delayMs, error, attemptsDelta: 0 });
    return d.status;
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
