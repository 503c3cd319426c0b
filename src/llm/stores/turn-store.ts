import type pg from 'pg';
import { targetOfRole } from '../../blackboard/targets.ts';
import type { ClaimType } from '../../blackboard/types.ts';
import { withTimeout } from '../../common/timeout.ts';
import { boundLocks, PUBLISH_TIMEOUT_MS } from '../../inbox/store.ts';
import { actorIdOf, turnIdOf } from '../../state/ids.ts';
import type { Fence } from '../../state/schema.ts';
import { ms, tx } from '../../state/sql.ts';

/** The grant's phase, as the inbox names turns (turnIdOf). */
export const phaseOf = (t: ClaimType) => (t === 'claim' ? 'parallel' : t);

/** A grant's actor and turn ids (the inbox's derivation). */
type GrantRef = { instance: string; claimId: string; role: string; claimType: ClaimType };
const idsOf = (g: GrantRef) => ({
  actor: actorIdOf(g.instance, g.claimId, g.role),
  turn: turnIdOf(g.instance, g.claimId, g.role, phaseOf(g.claimType)),
});

export type Acquired =
  | { kind: 'acquired'; fence: Fence }
  | { kind: 'busy' }
  | { kind: 'finished'; status: 'done' | 'failed' };

// The grant's live inbox row, by its turn id (unique index agent_inbox_turn; the turn id is derived
// from (instance, claim, role, phase), so it is the same lookup).
export const INBOX_LIVE = `SELECT 1 FROM holt.agent_inbox WHERE turn_id = $1
  AND status IN ('pending', 'claimed', 'waiting')`;

/**
 * The turn lease of LLM agents in the inbox's tables (holt.agent_state_head / agent_turns): a standard
 * pup leases the actor's head itself (epoch + 1, the fencing token), as the inbox's claim does for
 * workers; every step is written under that fence (StepStore, src/state/steps.ts). The budget ledger
 * and the working memory have stores of their own (usage-store.ts, memory-store.ts).
 */
export class TurnStore {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** Takes (or resumes) the turn of a grant under a lease; `busy` while another live pup holds it. */
  async acquire(g: {
    instance: string;
    claimId: string;
    role: string;
    claimType: ClaimType;
    owner: string;
    leaseMs: number;
  }): Promise<Acquired> {
    const actor = actorIdOf(g.instance, g.claimId, g.role);
    const phase = phaseOf(g.claimType);
    const turn = turnIdOf(g.instance, g.claimId, g.role, phase);
    return tx<Acquired>(this.pool, async (c) => {
      await c.query(
        `INSERT INTO holt.agent_state_head (instance, actor_id, role, worker_target, claim_id)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
        [g.instance, actor, g.role, targetOfRole(g.role), g.claimId],
      );
      await c.query(
        `INSERT INTO holt.agent_turns (turn_id, instance, actor_id, claim_id, role, phase, claim_type)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
        [turn, g.instance, actor, g.claimId, g.role, phase, g.claimType],
      );
      const t = await c.query<{ status: string }>(
        'SELECT status FROM holt.agent_turns WHERE turn_id = $1 FOR UPDATE',
        [turn],
      );
      const st = t.rows[0]?.status;
      if (st === 'done' || st === 'failed') return { value: { kind: 'finished', status: st } };
      // A turn with a live inbox row belongs to the inbox's fence (a worker runs it): one token, not two.
      const inbox = await c.query(INBOX_LIVE, [turn]);
      if (inbox.rowCount) return { value: { kind: 'busy' } };
      // A dead holder's lease expires; then the epoch moves on and its fence is worthless.
      const h = await c.query<{ turn_epoch: string }>(
        `UPDATE holt.agent_state_head SET status = 'running', active_turn_id = $3, turn_epoch = turn_epoch + 1,
           lease_owner = $4, lease_expires_at = now() + $5::interval, updated_at = now()
         WHERE instance = $1 AND actor_id = $2 AND (active_turn_id IS NULL OR active_turn_id = $3)
           AND (lease_owner IS NULL OR lease_expires_at < now() OR lease_owner = $4)
         RETURNING turn_epoch`,
        [g.instance, actor, turn, g.owner, ms(g.leaseMs)],
      );
      if (!h.rowCount) return { value: { kind: 'busy' } };
      const epoch = Number(h.rows[0]!.turn_epoch);
      await c.query(
        `UPDATE holt.agent_turns SET status = 'running', turn_epoch = $2, started_at = COALESCE(started_at, now())
         WHERE turn_id = $1`,
        [turn, epoch],
      );
      return {
        value: {
          kind: 'acquired',
          fence: { instance: g.instance, inboxId: '', actorId: actor, turnId: turn, epoch, owner: g.owner },
        },
      };
    });
  }

  private readonly FENCED = `instance = $1 AND actor_id = $2 AND turn_epoch = $3 AND active_turn_id = $4
    AND lease_owner = $5`;
  private fenceArgs = (f: Fence) => [f.instance, f.actorId, f.epoch, f.turnId, f.owner];

  /** Extends the lease; false = lost (someone took the turn over). */
  async renew(f: Fence, leaseMs: number): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE holt.agent_state_head SET lease_expires_at = now() + $6::interval WHERE ${this.FENCED}`,
      [...this.fenceArgs(f), ms(leaseMs)],
    );
    return r.rowCount === 1;
  }

  /** Gives the lease up (the turn stays active: a waiting question, a shutdown). */
  /**
   * A turn whose deliverable is on the blackboard but which never committed (its pup died between
   * the two): closed as done, its head idle and its fence dead. True when there was one to close.
   */
  async closeDelivered(g: GrantRef, artefactId: string): Promise<boolean> {
    const { actor, turn } = idsOf(g);
    return tx(this.pool, async (c) => {
      const t = await c.query(
        `UPDATE holt.agent_turns SET status = 'done', result_artefact_id = $2, ended_at = now(),
           error = 'closed on resume: its artefact was published before the turn committed'
         WHERE turn_id = $1 AND status NOT IN ('done', 'failed') RETURNING 1`,
        [turn, artefactId],
      );
      if (!t.rowCount) return { value: false };
      await c.query(
        `UPDATE holt.agent_state_head SET status = 'idle', active_turn_id = NULL, lease_owner = NULL,
           lease_expires_at = NULL, turn_epoch = turn_epoch + 1, updated_at = now()
         WHERE instance = $1 AND actor_id = $2 AND active_turn_id = $3`,
        [g.instance, actor, turn],
      );
      return { value: true };
    });
  }

  /**
   * A done or failed turn whose deliverable is gone from the blackboard (Redis lost data): queued
   * again, the actor's epoch moved on. True when there was one to reopen.
   */
  async reopenFinished(g: GrantRef, reason: string): Promise<boolean> {
    const { actor, turn } = idsOf(g);
    return tx(this.pool, async (c) => {
      const t = await c.query(
        `UPDATE holt.agent_turns SET status = 'queued', ended_at = NULL, result_artefact_id = NULL, error = $2
         WHERE turn_id = $1 AND status IN ('done', 'failed') RETURNING 1`,
        [turn, reason],
      );
      if (!t.rowCount) return { value: false };
      await c.query(
        `UPDATE holt.agent_state_head SET turn_epoch = turn_epoch + 1, updated_at = now()
         WHERE instance = $1 AND actor_id = $2`,
        [g.instance, actor],
      );
      return { value: true };
    });
  }

  async release(f: Fence, status: 'suspended' | 'dispatched'): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE holt.agent_state_head SET status = $6, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
       WHERE ${this.FENCED}`,
      [...this.fenceArgs(f), status],
    );
    return r.rowCount === 1;
  }

  /**
   * Ends the turn under the fence; `publish` (the blackboard write of the deliverable) runs while the
   * head is locked, so a pup that lost its lease can neither publish nor commit. False when stale.
   */
  async finish(
    f: Fence,
    end: { status: 'done' | 'failed'; artefactId: string; error?: string; result?: unknown },
    publish: () => Promise<void>,
  ): Promise<boolean> {
    return tx(this.pool, async (c) => {
      await boundLocks(c, PUBLISH_TIMEOUT_MS);
      const h = await c.query(
        `SELECT 1 FROM holt.agent_state_head WHERE ${this.FENCED} FOR UPDATE`,
        this.fenceArgs(f),
      );
      if (!h.rowCount) return { value: false, rollback: true };
      await withTimeout(publish(), PUBLISH_TIMEOUT_MS, 'blackboard publish');
      await c.query(
        `UPDATE holt.agent_state_head SET status = 'idle', active_turn_id = NULL, lease_owner = NULL,
           lease_expires_at = NULL, updated_at = now() WHERE ${this.FENCED}`,
        this.fenceArgs(f),
      );
      await c.query(
        `UPDATE holt.agent_turns SET status = $2, result_artefact_id = $3, error = $4, result = $5::jsonb,
           ended_at = now() WHERE turn_id = $1`,
        [f.turnId, end.status, end.artefactId, end.error ?? null, JSON.stringify(end.result ?? null)],
      );
      return { value: true };
    });
  }

  /** The reasons of the role's last failed turns, newest first (the failure history: docs/runtime-model.md § Four things with their own lifecycle). */
  async recentFailures(instance: string, role: string, limit = 3): Promise<string[]> {
    const r = await this.pool.query<{ error: string }>(
      `SELECT error FROM holt.agent_turns WHERE instance = $1 AND role = $2 AND status = 'failed'
         AND error IS NOT NULL ORDER BY ended_at DESC NULLS LAST LIMIT $3`,
      [instance, role, limit],
    );
    return r.rows.map((x) => x.error);
  }
}
