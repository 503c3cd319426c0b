import type { RingFn } from '../bus/doorbell.ts';
import type { Logger } from '../common/logger.ts';
import type { Grant, GrantDispatcher } from '../orchestrator/dispatch.ts';
import type { InboxStore } from './store.ts';

/**
 * The orchestrator's dispatcher for scalable roles: every grant (any phase, rework and recovery
 * included) becomes one inbox row, committed, and then a doorbell. The row is the truth; if the bell
 * is lost, the watchdog rings again. Idempotent per (claim, role, phase).
 */
export class InboxDispatcher implements GrantDispatcher {
  readonly store: InboxStore;
  readonly instance: string;
  readonly targetOf: (role: string) => string | undefined | Promise<string | undefined>;
  readonly ring: RingFn;
  readonly log: Logger | undefined;
  readonly announce: ((g: Grant) => Promise<void>) | undefined;
  constructor(opts: {
    store: InboxStore;
    instance: string;
    targetOf: (role: string) => string | undefined | Promise<string | undefined>;
    ring: RingFn;
    /** Holt's claim_granted workflow event for a new grant (observability: `holt watch`). */
    announce?: (g: Grant) => Promise<void>;
    log?: Logger;
  }) {
    this.announce = opts.announce;
    this.store = opts.store;
    this.instance = opts.instance;
    this.targetOf = opts.targetOf;
    this.ring = opts.ring;
    this.log = opts.log;
  }

  async dispatch(g: Grant): Promise<void> {
    const target = await this.targetOf(g.role);
    if (!target) throw new Error(`role ${g.role} is scalable but has no worker target`);
    const { created, row } = await this.store.enqueue({
      instance: this.instance,
      workerTarget: target,
      claimId: g.claim.id,
      role: g.role,
      claimType: g.claimType,
      phase: g.phase,
      payload: { artefact_id: g.claim.artefact_id, reason: g.reason ?? 'grant' },
    });
    if (created && (g.reason ?? 'grant') === 'grant') await this.announce?.(g);
    if (created)
      this.log?.info(
        {
          event_type: 'inbox_enqueued',
          claim_id: g.claim.id,
          role: g.role,
          worker_target: target,
          inbox_id: row.id,
        },
        'grant queued for workers',
      );
    // Ring even for a row that existed: a re-dispatch (recovery) is exactly when a bell may be missing.
    if (row.status === 'pending') this.ring(target, 'enqueue');
  }
}
