import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';

export const podMonitorName = (holt: string) => childName(holt, 'pods');

/**
 * The Holt's PodMonitor (Prometheus Operator): every pod of the Holt that serves metrics on its
 * `http` port (the orchestrator and the pups; the stores have none), with the Holt and the role as
 * target labels, which the chart's alerts and dashboard group by.
 */
export function podMonitor(owner: Owner, spec: HoltSpec): KubeObject {
  const name = podMonitorName(owner.name);
  return {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PodMonitor',
    metadata: meta(name, owner, { ...labels(owner.name, name, 'monitoring'), ...spec.monitoring.labels }),
    spec: {
      selector: { matchLabels: { 'holt.io/instance': owner.name } },
      podTargetLabels: ['holt.io/instance', 'holt.io/role'],
      podMetricsEndpoints: [{ port: 'http', path: '/metrics', interval: spec.monitoring.interval }],
    },
  };
}
