import type pg from 'pg';
import { targetOfRole } from '../../blackboard/targets.ts';
import type { ClaimType } from '../../blackboard/types.ts';
import { withTimeout } from '../../common/timeout.ts';
import { boundLocks, PUBLISH_TIMEOUT_MS } from '../../inbox/store.ts';
import {
  closeDelivered,
  endLease,
  ensureHead,
  ensureTurn,
  leaseTurn,
  lockLease,
  lockTurnStatus,
  markTurnRunning,
  releaseLease,
  renewLease,
  reopenFinished,
} from '../../state/head.ts';
import { actorIdOf, turnIdOf } from '../../state/ids.ts';
import type { Fence } from '../../state/schema.ts';
import { tx } from '../../state/sql.ts';

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
 * workers; every step is written under that fence (StepStore, src/state/steps.ts). The head's writes
 * are src/state/head.ts's (their one owner): this store keeps the transactions. A lost fence throws
 * FenceLostError. The budget ledger and the working memory have stores of their own (usage-store.ts,
 * memory-store.ts).
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
    const { actor, turn } = idsOf(g);
    const ref = { instance: g.instance, actorId: actor, turnId: turn };
    return tx<Acquired>(this.pool, async (c) => {
      await ensureHead(c, {
        instance: g.instance,
        actorId: actor,
        role: g.role,
        workerTarget: targetOfRole(g.role),
        claimId: g.claimId,
      });
      await ensureTurn(c, {
        ...ref,
        claimId: g.claimId,
        role: g.role,
        phase: phaseOf(g.claimType),
        claimType: g.claimType,
      });
      const st = await lockTurnStatus(c, turn);
      if (st === 'done' || st === 'failed') return { value: { kind: 'finished', status: st } };
      // A turn with a live inbox row belongs to the inbox's fence (a worker runs it): one token, not two.
      const inbox = await c.query(INBOX_LIVE, [turn]);
      if (inbox.rowCount) return { value: { kind: 'busy' } };
      // A dead holder's lease expires; then the epoch moves on and its fence is worthless.
      const epoch = await leaseTurn(c, { ...ref, owner: g.owner, leaseMs: g.leaseMs });
      if (epoch === null) return { value: { kind: 'busy' } };
      await markTurnRunning(c, turn, epoch);
      return {
        value: {
          kind: 'acquired',
          fence: { instance: g.instance, inboxId: '', actorId: actor, turnId: turn, epoch, owner: g.owner },
        },
      };
    });
  }

  /** Extends the lease; FenceLostError when lost (someone took the turn over). */
  renew(f: Fence, leaseMs: number): Promise<void> {
    return renewLease(this.pool, f, leaseMs);
  }

  /**
   * A turn whose deliverable is on the blackboard but which never committed (its pup died between
   * the two): closed as done, its head idle and its fence dead. True when there was one to close.
   */
  closeDelivered(g: GrantRef, artefactId: string): Promise<boolean> {
    const { actor, turn } = idsOf(g);
    return tx(this.pool, async (c) => ({
      value: await closeDelivered(c, { instance: g.instance, actorId: actor, turnId: turn }, artefactId),
    }));
  }

  /**
   * A done or failed turn whose deliverable is gone from the blackboard (Redis lost data): queued
   * again, the actor's epoch moved on. True when there was one to reopen.
   */
  reopenFinished(g: GrantRef, reason: string): Promise<boolean> {
    const { actor, turn } = idsOf(g);
    return tx(this.pool, async (c) => ({
      value: await reopenFinished(c, { instance: g.instance, actorId: actor, turnId: turn }, reason),
    }));
  }

  /** Gives the lease up (the turn stays active: a waiting question, a shutdown); FenceLostError when lost. */
  release(f: Fence, status: 'suspended' | 'dispatched'): Promise<void> {
    return releaseLease(this.pool, f, status);
  }

  /**
   * Ends the turn under the fence; `publish` (the blackboard write of the deliverable) runs while the
   * head is locked, so a pup that lost its lease can neither publish nor commit. FenceLostError, with
   * nothing published or written, when stale.
   */
  async finish(
    f: Fence,
    end: { status: 'done' | 'failed'; artefactId: string; error?: string; result?: unknown },
    publish: () => Promise<void>,
  ): Promise<void> {
    await tx(this.pool, async (c) => {
      await boundLocks(c, PUBLISH_TIMEOUT_MS);
      await lockLease(c, f);
      await withTimeout(publish(), PUBLISH_TIMEOUT_MS, 'blackboard publish');
      await endLease(c, f, end);
      return { value: undefined };
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
