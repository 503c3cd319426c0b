import { stringify } from 'yaml';
import { PROMETHEUS_IMAGE } from '../test/cluster/addons.ts';

/** Where the e2e's Prometheus runs. */
export const MONITORING_NS = 'monitoring';

/**
 * A Prometheus in the cluster, as a team without the Prometheus Operator runs it: Kubernetes pod
 * discovery, keeping the pods whose template says `prometheus.io/scrape: "true"`, at the port and
 * path their annotations give, with the pod's Holt and role as labels (what the PodMonitor of
 * spec.monitoring keeps too). Every 5 s, so a short run has enough samples for rate().
 */
export function prometheusManifests(): string {
  const config = {
    global: { scrape_interval: '5s', evaluation_interval: '5s' },
    scrape_configs: [
      {
        job_name: 'pods',
        kubernetes_sd_configs: [{ role: 'pod' }],
        relabel_configs: [
          {
            source_labels: ['__meta_kubernetes_pod_annotation_prometheus_io_scrape'],
            regex: 'true',
            action: 'keep',
          },
          { source_labels: ['__meta_kubernetes_pod_phase'], regex: 'Running', action: 'keep' },
          {
            source_labels: [
              '__meta_kubernetes_pod_ip',
              '__meta_kubernetes_pod_annotation_prometheus_io_port',
            ],
            regex: '(.+);(.+)',
            replacement: '$1:$2',
            target_label: '__address__',
          },
          {
            source_labels: ['__meta_kubernetes_pod_annotation_prometheus_io_path'],
            regex: '(.+)',
            target_label: '__metrics_path__',
          },
          { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
          { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
          {
            source_labels: ['__meta_kubernetes_pod_label_holt_io_instance'],
            target_label: 'holt_io_instance',
          },
          { source_labels: ['__meta_kubernetes_pod_label_holt_io_role'], target_label: 'holt_io_role' },
        ],
      },
    ],
  };
  const labels = { app: 'prometheus' };
  const objects = [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'prometheus', namespace: MONITORING_NS } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'e2e-prometheus' },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'e2e-prometheus' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'e2e-prometheus' },
      subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: MONITORING_NS }],
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'prometheus', namespace: MONITORING_NS },
      data: { 'prometheus.yml': stringify(config) },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'prometheus', namespace: MONITORING_NS, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: 'prometheus',
            securityContext: { runAsNonRoot: true, runAsUser: 65534, fsGroup: 65534 },
            containers: [
              {
                name: 'prometheus',
                image: PROMETHEUS_IMAGE(),
                imagePullPolicy: 'Never',
                args: [
                  '--config.file=/etc/prometheus/prometheus.yml',
                  '--storage.tsdb.path=/prometheus',
                  '--web.listen-address=:9090',
                ],
                ports: [{ name: 'web', containerPort: 9090 }],
                readinessProbe: { httpGet: { path: '/-/ready', port: 'web' }, periodSeconds: 2 },
                volumeMounts: [
                  { name: 'config', mountPath: '/etc/prometheus' },
                  { name: 'data', mountPath: '/prometheus' },
                ],
              },
            ],
            volumes: [
              { name: 'config', configMap: { name: 'prometheus' } },
              { name: 'data', emptyDir: {} },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'prometheus', namespace: MONITORING_NS },
      spec: { selector: labels, ports: [{ name: 'web', port: 9090, targetPort: 'web' }] },
    },
  ];
  return objects.map((o) => stringify(o)).join('---\n');
}

/** A path of Prometheus's HTTP API. */
export function prometheusApi(path: string, params: Record<string, string>): string {
  return `/api/v1/${path}?${new URLSearchParams(params)}`;
}

export interface PromVector {
  status: string;
  data: {
    resultType: string;
    result: { metric: Record<string, string>; value?: [number, string]; values?: [number, string][] }[];
  };
}
