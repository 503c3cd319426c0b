import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { KubeClient } from './kube.ts';

/** The operator's Prometheus metrics (one registry per operator, so tests can run several). */
export interface OperatorMetrics {
  registry: Registry;
  reconciles: Counter<'controller' | 'result'>;
  reconcileSeconds: Histogram<'controller'>;
  queueDepth: Gauge<'controller'>;
  autoscalerDecisions: Counter<'reason'>;
  autoscalerErrors: Counter;
  poolBacklog: Gauge<'namespace' | 'pool'>;
  poolDesired: Gauge<'namespace' | 'pool'>;
  isLeader: Gauge;
}

export function createMetrics(client: KubeClient, depths: () => Record<string, number>): OperatorMetrics {
  const registry = new Registry();
  const queueDepth = new Gauge({
    name: 'holt_operator_queue_depth',
    help: 'Keys waiting in each work queue',
    labelNames: ['controller'],
    registers: [registry],
    collect() {
      for (const [c, d] of Object.entries(depths())) this.set({ controller: c }, d);
    },
  });
  new Counter({
    name: 'holt_operator_api_requests_total',
    help: 'Requests this operator sent to the API server, by verb (watches excluded)',
    labelNames: ['verb'],
    registers: [registry],
    collect() {
      // The client keeps the counts; a Counter has no set, so it is rebuilt from them at each scrape.
      this.reset();
      for (const [v, n] of client.counts) this.inc({ verb: v }, n);
    },
  });
  return {
    registry,
    queueDepth,
    reconciles: new Counter({
      name: 'holt_operator_reconcile_total',
      help: 'Reconciles by controller and result (success, requeue, error)',
      labelNames: ['controller', 'result'],
      registers: [registry],
    }),
    reconcileSeconds: new Histogram({
      name: 'holt_operator_reconcile_duration_seconds',
      help: 'Time per reconcile',
      labelNames: ['controller'],
      buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 2, 10],
      registers: [registry],
    }),
    autoscalerDecisions: new Counter({
      name: 'holt_autoscaler_decisions_total',
      help: 'Autoscaler decisions by reason (activation, target, cooldown, stabilization, idle, fallback, ...)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    autoscalerErrors: new Counter({
      name: 'holt_autoscaler_errors_total',
      help: 'Failed backlog reads',
      registers: [registry],
    }),
    poolBacklog: new Gauge({
      name: 'holt_workerpool_backlog',
      help: 'Pending + in-flight claims of a pool target',
      labelNames: ['namespace', 'pool'],
      registers: [registry],
    }),
    poolDesired: new Gauge({
      name: 'holt_workerpool_desired_replicas',
      help: 'Replicas the autoscaler wants',
      labelNames: ['namespace', 'pool'],
      registers: [registry],
    }),
    isLeader: new Gauge({
      name: 'holt_operator_leader',
      help: '1 while this replica leads',
      registers: [registry],
    }),
  };
}
