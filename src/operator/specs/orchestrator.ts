import type { V1DeploymentSpec } from '@kubernetes/client-node';
import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../runtime/kube.ts';
import { childName, labels, meta, type Owner, selectorLabels } from './meta.ts';
import {
  containerSecurity,
  HEALTH_PORT,
  holtProbes,
  podSecurity,
  RUNTIME_UID,
  resourcesOf,
  scrapeAnnotations,
} from './pod.ts';
import { orchestratorAccount } from './serviceaccount.ts';
import { storeEnv, storeTlsClient } from './stores.ts';

export const orchestratorName = (holt: string) => childName(holt, 'orchestrator');
/** Where the runtime image keeps the holt program (also copied into agent images by an init container). */
export const HOLT_BIN = '/opt/holt/bin/holt';

/** The orchestrator Deployment (one active pod holds the Redis lock; extra replicas stand by). */
export function orchestratorDeployment(owner: Owner, spec: HoltSpec, runtimeImage: string): KubeObject {
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
              { name: 'HOLT_MAX_REVIEW_ITERATIONS', value: String(o.maxReviewIterations) },
              { name: 'HOLT_RETENTION_DAYS', value: String(o.retentionDays) },
              ...storeEnv(owner.name, spec.stores, 'orchestrator'),
              ...tls.env,
            ],
            ports: [{ name: 'http', containerPort: HEALTH_PORT }],
            ...holtProbes(),
            resources: resourcesOf(o.resources, { requests: { cpu: '50m', memory: '128Mi' } }),
            securityContext: containerSecurity(),
            volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }, ...tls.mounts],
          },
        ],
        volumes: [{ name: 'tmp', emptyDir: {} }, ...tls.volumes],
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

/** The orchestrator's health/metrics Service (Holt status endpoint, Prometheus scrapes). */
export function orchestratorService(owner: Owner): KubeObject {
  const name = orchestratorName(owner.name);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(name, owner, labels(owner.name, name, 'orchestrator')),
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(name, 'orchestrator'),
      ports: [{ name: 'http', port: HEALTH_PORT, targetPort: 'http' }],
    },
  };
}
