import { Gauge, type Registry } from 'prom-client';
import type { QueueDepth } from '../state/schema.ts';

/** Queue depth per worker target, for Prometheus and the operator's autoscaler. */
export class InboxMetrics {
  readonly depth: Gauge<'worker_target' | 'state'>;
  readonly oldest: Gauge<'worker_target'>;
  private seen = new Set<string>();
  constructor(registry: Registry) {
    this.depth = new Gauge({
      name: 'holt_inbox_depth',
      help: 'Inbox rows per worker target: pending (waiting) and in_flight (claimed under a lease).',
      labelNames: ['worker_target', 'state'],
      registers: [registry],
    });
    this.oldest = new Gauge({
      name: 'holt_inbox_oldest_pending_seconds',
      help: 'Age of the oldest due pending inbox row per worker target.',
      labelNames: ['worker_target'],
      registers: [registry],
    });
  }

  /** Sets every target's figures; a target that emptied out reads 0 rather than its last value. */
  observe(depths: QueueDepth[]): void {
    const now = new Set(depths.map((d) => d.worker_target));
    for (const t of this.seen)
      if (!now.has(t))
        this.observe1({ worker_target: t, pending: 0, in_flight: 0, oldest_pending_seconds: 0 });
    for (const d of depths) this.observe1(d);
    this.seen = new Set([...this.seen, ...now]);
  }

  private observe1(d: QueueDepth): void {
    this.depth.set({ worker_target: d.worker_target, state: 'pending' }, d.pending);
    this.depth.set({ worker_target: d.worker_target, state: 'in_flight' }, d.in_flight);
    this.oldest.set({ worker_target: d.worker_target }, d.oldest_pending_seconds);
  }
}
