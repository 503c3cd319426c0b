import type { V1DeploymentSpec, V1EnvVar } from '@kubernetes/client-node';
import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner, selectorLabels } from './meta.ts';
import {
  containerSecurity,
  HEALTH_PORT,
  holtProbes,
  INGRESS_PORT,
  podSecurity,
  RUNTIME_UID,
  resourcesOf,
  scrapeAnnotations,
} from './pod.ts';
import { orchestratorAccount } from './serviceaccount.ts';
import { storeEnv, storeTlsClient } from './stores.ts';
import { tracingEnv } from './tracing.ts';

export const orchestratorName = (holt: string) => childName(holt, 'orchestrator');
/** Where the runtime image keeps the holt program (also copied into agent images by an init container). */
export const HOLT_BIN = '/opt/holt/bin/holt';

/** The orchestrator's resources unless spec.orchestrator.resources says otherwise. */
export const ORCHESTRATOR_RESOURCES = {
  requests: { cpu: '50m', memory: '128Mi' },
  limits: { memory: '512Mi' },
};

/** The console at /console of the ingress port (src/console), when the Holt enables it. */
function consoleEnv(spec: HoltSpec): V1EnvVar[] {
  const c = spec.ingress.console;
  if (!c.enabled) return [];
  return [
    { name: 'HOLT_CONSOLE', value: 'true' },
    ...(c.tracesUrl ? [{ name: 'HOLT_CONSOLE_TRACES_URL', value: c.tracesUrl }] : []),
  ];
}

/**
 * The ingress port, when an Agent enables ingress or the Holt its console: the hashed tokens' Secret
 * and where it is mounted.
 */
export interface OrchestratorIngress {
  tokensSecret: string;
  dir: string;
}

/**
 * The orchestrator Deployment (one active pod holds the Redis lock; extra replicas stand by). With
 * `ingress`, it also serves living agents' ingress on INGRESS_PORT, reading the hashed tokens the
 * Secret's volume holds (the kubelet refreshes it, and the orchestrator re-reads the file on change).
 */
export function orchestratorDeployment(
  owner: Owner,
  spec: HoltSpec,
  runtimeImage: string,
  ingress?: OrchestratorIngress,
): KubeObject {
  const name = orchestratorName(owner.name);
  const lbls = labels(owner.name, name, 'orchestrator');
  const o = spec.orchestrator;
  const tls = storeTlsClient(spec.stores);
  const dep: V1DeploymentSpec = {
    replicas: o.replicas,
    selector: { matchLabels: selectorLabels(name, 'orchestrator') },
    template: {
      metadata: { labels: lbls, annotations: scrapeAnnotations() },
      spec: {
        serviceAccountName: orchestratorAccount(owner.name),
        automountServiceAccountToken: false,
        securityContext: podSecurity(RUNTIME_UID),
        containers: [
          {
            name: 'orchestrator',
            image: o.image ?? spec.runtimeImage ?? runtimeImage,
            // The image's entrypoint (tini -- holt) stays PID 1: it reaps and forwards signals.
            args: ['orchestrator'],
            env: [
              { name: 'HOLT_INSTANCE_NAME', value: owner.name },
              { name: 'HOLT_HEALTH_PORT', value: String(HEALTH_PORT) },
              { name: 'HOLT_BID_TIMEOUT_MS', value: String(Math.round(o.bidTimeoutSeconds * 1000)) },
              ...(o.maxBidTimeoutSeconds === undefined
                ? []
                : [
                    {
                      name: 'HOLT_MAX_BID_TIMEOUT_MS',
                      value: String(Math.round(o.maxBidTimeoutSeconds * 1000)),
                    },
                  ]),
              { name: 'HOLT_MAX_REVIEW_ITERATIONS', value: String(o.maxReviewIterations) },
              { name: 'HOLT_RETENTION_DAYS', value: String(o.retentionDays) },
              ...storeEnv(owner.name, spec.stores, 'orchestrator'),
              ...tls.env,
              ...tracingEnv(spec.tracing),
              ...(ingress
                ? [
                    { name: 'HOLT_INGRESS_PORT', value: String(INGRESS_PORT) },
                    { name: 'HOLT_INGRESS_TOKENS_FILE', value: `${ingress.dir}/tokens.json` },
                    ...consoleEnv(spec),
                  ]
                : []),
            ],
            ports: [
              { name: 'http', containerPort: HEALTH_PORT },
              ...(ingress ? [{ name: 'ingress', containerPort: INGRESS_PORT }] : []),
            ],
            ...holtProbes(),
            // A memory limit by default: it serves strangers (the ingress), and what they make it hold
            // must end in an OOM-kill of this pod, not the node's memory. No CPU limit (V8's helpers).
            resources: resourcesOf(o.resources, ORCHESTRATOR_RESOURCES),
            securityContext: containerSecurity(),
            volumeMounts: [
              { name: 'tmp', mountPath: '/tmp' },
              ...tls.mounts,
              ...(ingress ? [{ name: 'ingress-tokens', mountPath: ingress.dir, readOnly: true }] : []),
            ],
          },
        ],
        volumes: [
          { name: 'tmp', emptyDir: {} },
          ...tls.volumes,
          // Optional: the orchestrator starts before the operator has written it (no tokens: every request 401).
          ...(ingress
            ? [{ name: 'ingress-tokens', secret: { secretName: ingress.tokensSecret, optional: true } }]
            : []),
        ],
      },
    },
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(name, owner, lbls),
    spec: dep,
  };
}

/** The orchestrator's health/metrics Service (Holt status endpoint, Prometheus scrapes), and its ingress port. */
export function orchestratorService(owner: Owner, ingress = false): KubeObject {
  const name = orchestratorName(owner.name);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(name, owner, labels(owner.name, name, 'orchestrator')),
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(name, 'orchestrator'),
      ports: [
        { name: 'http', port: HEALTH_PORT, targetPort: 'http' },
        ...(ingress ? [{ name: 'ingress', port: INGRESS_PORT, targetPort: 'ingress' }] : []),
      ],
    },
  };
}
