import { DEFAULT_RUNTIME_IMAGE } from '../api/common.ts';
import type { ProgramSpec } from '../common/program.ts';
import { TRACING_SETTINGS } from '../telemetry/settings.ts';

/** `holt operator`'s command line: each setting a flag over its environment variable, the flag winning. */
export const OPERATOR_PROGRAM: ProgramSpec = {
  name: 'holt operator',
  description:
    'Run the Holt operator: it reconciles Holt, Agent and WorkerPool resources, autoscales workers and reports status. Each setting is a flag or an environment variable; the flag wins.',
  settings: [
    {
      env: 'HOLT_OPERATOR_NAMESPACES',
      flag: 'namespaces',
      help: 'namespaces to watch, comma-separated [all]',
    },
    {
      env: 'HOLT_OPERATOR_LEADER_ELECT',
      flag: 'leader-elect',
      optionalValue: true,
      help: 'elect one active replica through a Lease [true]',
    },
    {
      env: 'POD_NAMESPACE',
      flag: 'operator-namespace',
      help: "the operator's namespace: the stores admit it only from there [default]",
    },
    {
      env: 'HOLT_OPERATOR_CLUSTER_CIDRS',
      flag: 'cluster-cidrs',
      help: "the cluster's pod and service CIDRs, never reachable through an agent's egress",
    },
    {
      env: 'HOLT_OPERATOR_LEASE_NAME',
      flag: 'lease-name',
      help: 'the leader election Lease [holt-operator]',
    },
    {
      env: 'HOLT_OPERATOR_LEASE_NAMESPACE',
      flag: 'lease-namespace',
      help: "the Lease's namespace [the operator's namespace, else default]",
    },
    { env: 'HOLT_OPERATOR_HEALTH_PORT', flag: 'health-port', help: 'port of /healthz and /readyz [8081]' },
    { env: 'HOLT_OPERATOR_METRICS_PORT', flag: 'metrics-port', help: 'port of /metrics [8080]' },
    {
      env: 'HOLT_RUNTIME_IMAGE',
      flag: 'runtime-image',
      help: `image of the orchestrator, pups and jobs [${DEFAULT_RUNTIME_IMAGE}]`,
    },
    { env: 'POD_NAME', flag: 'identity', help: 'this replica in the leader election [the host name]' },
    {
      env: 'HOLT_OPERATOR_STATUS_POLL_MS',
      flag: 'status-poll-ms',
      help: 'how often runtime values (claims in flight, budgets, quarantine, retention) are re-read [10000]',
    },
    { env: 'KUBECONFIG', flag: 'kubeconfig', help: 'a kubeconfig file [in-cluster, else ~/.kube/config]' },
    ...TRACING_SETTINGS,
  ],
  epilog: 'Reference: charts/holt-operator/README.md and docs/configuration.md.',
};
