import { Counter, Gauge, type Registry } from 'prom-client';

/** Why the ingress turned something away before or instead of queueing it (a metric label). */
export type RefusedReason =
  | 'connection_cap'
  | 'source_cap'
  | 'evicted'
  | 'deadline'
  | 'auth_limited'
  | 'standby'
  | 'backlog_full';

/**
 * The ingress's figures: kept in-process (what the tests and the bench read) and, given a registry,
 * exported to Prometheus as well.
 */
export class IngressMetrics {
  readonly refused: Record<string, number> = {};
  /** Body bytes held in memory, in all: only requests whose token was valid are read. */
  bodyBytes = 0;
  private readonly requests?: Counter<'code'>;
  private readonly refusals?: Counter<'reason'>;
  constructor(registry?: Registry, connections?: () => number) {
    if (!registry) return;
    this.requests = new Counter({
      name: 'holt_ingress_requests_total',
      help: "Requests the living agents' ingress answered, by HTTP status code.",
      labelNames: ['code'],
      registers: [registry],
    });
    this.refusals = new Counter({
      name: 'holt_ingress_refused_total',
      help: 'Connections and requests the ingress turned away, by reason (caps, deadlines, failed-auth limit, standby, full backlog).',
      labelNames: ['reason'],
      registers: [registry],
    });
    new Gauge({
      name: 'holt_ingress_connections',
      help: 'Connections open to the ingress.',
      registers: [registry],
      collect() {
        this.set(connections?.() ?? 0);
      },
    });
  }

  answered(status: number): void {
    this.requests?.inc({ code: String(status) });
  }

  refuse(reason: RefusedReason): void {
    this.refused[reason] = (this.refused[reason] ?? 0) + 1;
    this.refusals?.inc({ reason });
  }
}
