import type { RingFn } from '../bus/doorbell.ts';
import type { Logger } from '../common/logger.ts';
import type { InboxStore } from '../inbox/store.ts';
import { traceFieldsOf } from '../telemetry/carrier.ts';
import type { Grant, GrantDispatcher } from './dispatch.ts';

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
  readonly outputExists: ((g: Grant) => Promise<boolean>) | undefined;
  readonly reopened: ((g: Grant, reason: string) => Promise<void>) | undefined;
  constructor(opts: {
    store: InboxStore;
    instance: string;
    targetOf: (role: string) => string | undefined | Promise<string | undefined>;
    ring: RingFn;
    /** Holt's claim_granted workflow event for a new grant (observability: `holt watch`). */
    announce?: (g: Grant) => Promise<void>;
    /**
     * Whether the grant's output is on the blackboard. Given, a re-dispatched grant whose row is done
     * or failed but whose output is gone (Redis lost data) is reopened instead of left hanging.
     */
    outputExists?: (g: Grant) => Promise<boolean>;
    /** Told of each reopened grant (the orchestrator publishes grant_reopened). */
    reopened?: (g: Grant, reason: string) => Promise<void>;
    log?: Logger;
  }) {
    this.announce = opts.announce;
    this.outputExists = opts.outputExists;
    this.reopened = opts.reopened;
    this.store = opts.store;
    this.instance = opts.instance;
    this.targetOf = opts.targetOf;
    this.ring = opts.ring;
    this.log = opts.log;
  }

  async dispatch(g: Grant): Promise<void> {
    const target = await this.targetOf(g.role);
    if (!target) throw new Error(`role ${g.role} is scalable but has no worker target`);
    let { created, row } = await this.store.enqueue({
      instance: this.instance,
      workerTarget: target,
      claimId: g.claim.id,
      role: g.role,
      claimType: g.claimType,
      phase: g.phase,
      // The claim's trace rides on the row: each attempt at it is a span in that trace.
      payload: { artefact_id: g.claim.artefact_id, reason: g.reason ?? 'grant', ...traceFieldsOf(g.claim) },
    });
    if (created && (g.reason ?? 'grant') === 'grant') await this.announce?.(g);
    if (!created && (row.status === 'done' || row.status === 'failed') && this.outputExists) {
      if (!(await this.outputExists(g))) {
        const reason = `reopened: the row was ${row.status} but its output artefact is missing from the blackboard`;
        const again = await this.store.reopen(row.id, reason);
        if (again) {
          row = again;
          this.log?.warn(
            { event_type: 'grant_reopened', claim_id: g.claim.id, role: g.role, inbox_id: row.id, reason },
            'grant reopened',
          );
          await this.reopened?.(g, reason);
        }
      }
    }
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
