import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { CLAIM_STATUSES, type ClaimStatus } from '../blackboard/types.ts';

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** The orchestrator's Prometheus metrics, on a registry of its own (several can run in one process). */
export class OrchestratorMetrics {
  readonly registry = new Registry();
  /** Last status seen per active claim; the gauge is computed from it at scrape time. */
  private readonly statusOf = new Map<string, ClaimStatus>();
  readonly finished = new Counter({
    name: 'holt_orchestrator_claims_finished_total',
    help: 'Claims that reached complete or terminated',
    labelNames: ['status'],
    registers: [this.registry],
  });
  readonly phaseDuration = new Histogram({
    name: 'holt_orchestrator_phase_duration_seconds',
    help: 'From a phase grant to its last output',
    labelNames: ['phase'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly bidLatency = new Histogram({
    name: 'holt_orchestrator_bid_latency_seconds',
    help: 'From claim creation to consensus (all bids in, or the bid timeout)',
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly grantLatency = new Histogram({
    name: 'holt_orchestrator_artefact_to_grant_seconds',
    help: 'From an artefact (created_at_ms) to the first grant on its claim',
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly grants = new Counter({
    name: 'holt_orchestrator_grants_total',
    help: 'Grants dispatched',
    labelNames: ['claim_type', 'reason'],
    registers: [this.registry],
  });
  readonly bidTimeouts = new Counter({
    name: 'holt_orchestrator_bid_timeouts_total',
    help: 'Consensus rounds closed by the bid timeout',
    registers: [this.registry],
  });
  readonly lateBids = new Counter({
    name: 'holt_orchestrator_late_bids_total',
    help: 'Bids heard after the bid timeout closed their consensus (counted as ignore), by role',
    labelNames: ['role'],
    registers: [this.registry],
  });
  readonly quarantined = new Counter({
    name: 'holt_orchestrator_quarantined_total',
    help: 'Stored items set aside and never acted on, by kind and reason',
    labelNames: ['kind', 'reason'],
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: 'holt_orchestrator_leader',
    help: '1 while this orchestrator holds the instance lease',
    registers: [this.registry],
  });

  constructor() {
    const statusOf = this.statusOf;
    new Gauge({
      name: 'holt_orchestrator_claims',
      help: 'Active claims by status, as last seen by this orchestrator',
      labelNames: ['status'],
      registers: [this.registry],
      collect() {
        const counts = new Map<string, number>(CLAIM_STATUSES.map((s) => [s, 0]));
        for (const s of statusOf.values()) counts.set(s, (counts.get(s) ?? 0) + 1);
        for (const [status, n] of counts)
          if (status !== 'complete' && status !== 'terminated') this.set({ status }, n);
      },
    });
  }

  claimStatus(id: string, status: ClaimStatus, previous?: ClaimStatus): void {
    if (status === 'complete' || status === 'terminated') {
      this.statusOf.delete(id);
      if (previous !== status) this.finished.inc({ status });
    } else this.statusOf.set(id, status);
  }

  forget(id: string): void {
    this.statusOf.delete(id);
  }
}
