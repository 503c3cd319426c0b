import { LRUCache } from 'lru-cache';
import type { Blackboard } from '../blackboard/client.ts';
import type { BlackboardDataError } from '../blackboard/codec.ts';
import { quarantineClaim, quarantineItem } from '../blackboard/quarantine.ts';
import type { Quarantined } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import type { OrchestratorMetrics } from './metrics.ts';

/** One item to set aside: what, where, and why (a reason code; `detail` says more). */
export type QuarantineItem = Omit<Quarantined, 'at_ms'>;

export interface QuarantineDeps {
  bb: () => Blackboard;
  log: Logger;
  metrics: OrchestratorMetrics;
  /** Only the leader writes: a standby (or a term that lost its lease) reports nothing. */
  alive: () => boolean;
}

/**
 * The orchestrator's quarantine: stored items never acted on, each recorded once in the quarantine
 * hash (which `holt status` lists) and reported once (a warning, `holt_orchestrator_quarantined_total`,
 * a `quarantined` workflow event). A quarantined claim also leaves the active and dormant sets, so no
 * recovery, reconcile pass or step reads it again.
 */
export class Quarantine {
  readonly #d: QuarantineDeps;
  /** Items this process already recorded (the hash remembers across restarts). */
  readonly #done = new LRUCache<string, true>({ max: 10_000 });
  readonly #pending = new Set<Promise<void>>();

  constructor(d: QuarantineDeps) {
    this.#d = d;
  }

  async add(q: QuarantineItem): Promise<void> {
    const key = `${q.kind}:${q.id}`;
    if (this.#done.has(key) || !this.#d.alive()) return;
    const bb = this.#d.bb();
    const fresh = q.kind === 'claim' ? await quarantineClaim(bb, q) : await quarantineItem(bb, q);
    this.#done.set(key, true);
    if (!fresh) return;
    this.#d.log.warn({ event_type: `${q.kind}_quarantined`, ...q }, `${q.kind}_quarantined`);
    this.#d.metrics.quarantined.inc({ kind: q.kind, reason: q.reason });
    // Lossy by contract: the hash holds the record, the event only tells watchers sooner.
    await bb.publishWorkflowEvent({ event: 'quarantined', data: q }).catch(() => undefined);
  }

  /** The blackboard's sink for an item that does not parse: recorded in the background. */
  readonly malformed = (e: BlackboardDataError): void => {
    const p = this.add({ kind: e.kind, id: e.id, reason: 'malformed', detail: e.reason })
      .catch((err: unknown) =>
        this.#d.log.warn(
          { event_type: 'quarantine_failed', kind: e.kind, id: e.id, error: String(err) },
          'quarantine_failed',
        ),
      )
      .finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  };

  /** Resolves once the background records begun so far are written (a graceful stop waits for them). */
  async settled(): Promise<void> {
    while (this.#pending.size) await Promise.all([...this.#pending]);
  }
}
