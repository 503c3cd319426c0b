import { Counter, Histogram, Registry } from 'prom-client';

/** The pup's Prometheus metrics, on a registry of its own (several pups can share a process in tests). */
export class PupMetrics {
  readonly registry = new Registry();
  readonly bids: Counter<'bid_type' | 'source'>;
  readonly grants: Counter<'claim_type' | 'via'>;
  readonly toolRuns: Counter<'outcome'>;
  readonly toolDuration: Histogram<'outcome'>;
  readonly failures: Counter<'class'>;

  constructor(labels: { instance: string; role: string; mode: string }) {
    // `instance` and `job` are Prometheus's own target labels: ours is holt_instance.
    this.registry.setDefaultLabels({ holt_instance: labels.instance, role: labels.role, mode: labels.mode });
    const registers = [this.registry];
    this.bids = new Counter({
      name: 'holt_pup_bids_total',
      help: 'Bids submitted, by bid type and by what chose it (script, strategy, default)',
      labelNames: ['bid_type', 'source'],
      registers,
    });
    this.grants = new Counter({
      name: 'holt_pup_grants_total',
      help: 'Grants taken for execution, by claim type and how they were found (event, rescan, claim)',
      labelNames: ['claim_type', 'via'],
      registers,
    });
    this.toolRuns = new Counter({
      name: 'holt_pup_tool_runs_total',
      help: 'Tool executions by outcome (success, failure)',
      labelNames: ['outcome'],
      registers,
    });
    this.failures = new Counter({
      name: 'holt_pup_failures_total',
      help: 'Failure artefacts written, by error class (config, auth, quota, transient, model_output, tool)',
      labelNames: ['class'],
      registers,
    });
    this.toolDuration = new Histogram({
      name: 'holt_pup_tool_duration_seconds',
      help: 'Tool execution time',
      labelNames: ['outcome'],
      buckets: [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600],
      registers,
    });
  }
}
