import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { JAEGER_VERSION, jaegerBinary } from '../harness/jaeger.ts';
import { clusterTool, clusterVersion } from './bins.ts';
import { nodePaths, PAUSE_IMAGE } from './config.ts';
import { type ImageSpec, writeImageArchive } from './image.ts';
import type { ClusterPlan } from './plan.ts';

/**
 * The cluster's own images and add-ons, as a kubeadm or kind cluster has them: the pause image,
 * CoreDNS behind the kube-dns Service, and a default StorageClass served by rancher's
 * local-path-provisioner (volumes are directories under each node's own folder).
 */
export const COREDNS_IMAGE = () => `holt.local/coredns:${clusterVersion('COREDNS_VERSION')}`;
export const PROVISIONER_IMAGE = () =>
  `holt.local/local-path-provisioner:${clusterVersion('LOCAL_PATH_VERSION')}`;
export const HELPER_IMAGE = 'holt.local/busybox:static';
/** The e2e's in-cluster Prometheus (the scrape hints and the dashboard's queries, for real). */
export const PROMETHEUS_IMAGE = () => `holt.local/prometheus:${clusterVersion('PROMETHEUS_VERSION')}`;
/** The e2e's in-cluster trace backend: the Jaeger `make setup` builds (test/harness/jaeger.ts). */
export const JAEGER_IMAGE = `holt.local/jaeger:${JAEGER_VERSION}`;
const DNS_PORT = 1053; // unprivileged inside the pod; the Service maps 53 to it

/** The archives of the add-ons' images (`docker save` format), written under `dir`. */
export function addonImages(dir: string): string[] {
  const busybox = clusterTool('BUSYBOX');
  const specs: ImageSpec[] = [
    {
      ref: PAUSE_IMAGE,
      files: [{ path: '/pause', from: clusterTool('PAUSE') }],
      entrypoint: ['/pause'],
      user: '65535',
    },
    {
      ref: COREDNS_IMAGE(),
      files: [{ path: '/coredns', from: clusterTool('COREDNS') }],
      entrypoint: ['/coredns'],
      user: '65532',
    },
    {
      ref: PROVISIONER_IMAGE(),
      files: [{ path: '/usr/bin/local-path-provisioner', from: clusterTool('LOCAL_PATH_PROVISIONER') }],
      entrypoint: ['/usr/bin/local-path-provisioner'],
    },
    {
      ref: PROMETHEUS_IMAGE(),
      files: [{ path: '/bin/prometheus', from: clusterTool('PROMETHEUS') }],
      entrypoint: ['/bin/prometheus'],
      user: '65534',
    },
    {
      ref: JAEGER_IMAGE,
      files: [{ path: '/jaeger', from: jaegerBinary() }],
      entrypoint: ['/jaeger'],
      user: '65534',
    },
    {
      ref: HELPER_IMAGE,
      files: [
        { path: '/bin/busybox', from: busybox },
        ...['sh', 'mkdir', 'rm', 'chmod', 'ls', 'cat', 'sleep'].map((c) => ({
          path: `/bin/${c}`,
          link: 'busybox',
        })),
      ],
      entrypoint: ['/bin/sh'],
    },
  ];
  return specs.map((s, i) => {
    const work = join(dir, 'images', String(i));
    mkdirSync(work, { recursive: true });
    return writeImageArchive(s, work);
  });
}

const NS = 'kube-system';
/** A ReadWriteMany StorageClass: one directory all nodes mount (they share the machine's filesystem). */
export const SHARED_STORAGE_CLASS = 'shared';
export const sharedVolumes = (clusterDir: string) => `${clusterDir}/shared-volumes`;
const LPP_NS = 'local-path-storage';

function coreDns(plan: ClusterPlan): object[] {
  const labels = { 'k8s-app': 'kube-dns' };
  const corefile = `.:${DNS_PORT} {
    errors
    health :8080
    ready :8181
    kubernetes ${plan.clusterDomain} in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loop
    reload
    loadbalance
}
`;
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'coredns', namespace: NS } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'system:coredns' },
      rules: [
        {
          apiGroups: [''],
          resources: ['endpoints', 'services', 'pods', 'namespaces'],
          verbs: ['list', 'watch'],
        },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'system:coredns' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:coredns' },
      subjects: [{ kind: 'ServiceAccount', name: 'coredns', namespace: NS }],
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'coredns', namespace: NS },
      data: { Corefile: corefile },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'coredns', namespace: NS, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: 'coredns',
            priorityClassName: 'system-cluster-critical',
            dnsPolicy: 'Default',
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65532,
              seccompProfile: { type: 'RuntimeDefault' },
            },
            containers: [
              {
                name: 'coredns',
                image: COREDNS_IMAGE(),
                imagePullPolicy: 'IfNotPresent',
                args: ['-conf', '/etc/coredns/Corefile'],
                ports: [
                  { name: 'dns', containerPort: DNS_PORT, protocol: 'UDP' },
                  { name: 'dns-tcp', containerPort: DNS_PORT, protocol: 'TCP' },
                ],
                resources: { requests: { cpu: '20m', memory: '32Mi' }, limits: { memory: '128Mi' } },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ['ALL'] },
                },
                livenessProbe: { httpGet: { path: '/health', port: 8080 }, periodSeconds: 10 },
                readinessProbe: { httpGet: { path: '/ready', port: 8181 }, periodSeconds: 2 },
                volumeMounts: [{ name: 'config', mountPath: '/etc/coredns', readOnly: true }],
              },
            ],
            volumes: [{ name: 'config', configMap: { name: 'coredns' } }],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kube-dns', namespace: NS, labels },
      spec: {
        clusterIP: plan.dnsServiceIp,
        selector: labels,
        ports: [
          { name: 'dns', port: 53, targetPort: DNS_PORT, protocol: 'UDP' },
          { name: 'dns-tcp', port: 53, targetPort: DNS_PORT, protocol: 'TCP' },
        ],
      },
    },
  ];
}

function localPath(plan: ClusterPlan, clusterDir: string): object[] {
  const sa = 'local-path-provisioner';
  // `local-path`: a directory on the pod's node (ReadWriteOnce). `shared`: a directory every node sees
  // (they share this machine's filesystem), so ReadWriteMany works as on NFS.
  // With storageClassConfigs, the provisioner serves only the classes named there.
  const nodePathMap = plan.nodes.map((n) => ({ node: n.name, paths: [nodePaths(clusterDir, n).volumes] }));
  const config = {
    nodePathMap,
    storageClassConfigs: {
      'local-path': { nodePathMap },
      [SHARED_STORAGE_CLASS]: { sharedFileSystemPath: sharedVolumes(clusterDir) },
    },
  };
  const helperPod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'helper-pod' },
    spec: {
      priorityClassName: 'system-node-critical',
      tolerations: [{ key: 'node.kubernetes.io/disk-pressure', operator: 'Exists', effect: 'NoSchedule' }],
      containers: [{ name: 'helper-pod', image: HELPER_IMAGE, imagePullPolicy: 'IfNotPresent' }],
    },
  };
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: LPP_NS } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa, namespace: LPP_NS } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: sa, namespace: LPP_NS },
      rules: [
        {
          apiGroups: [''],
          resources: ['pods'],
          verbs: ['get', 'list', 'watch', 'create', 'patch', 'update', 'delete'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: sa, namespace: LPP_NS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: sa },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: LPP_NS }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'local-path-provisioner' },
      rules: [
        {
          apiGroups: [''],
          resources: ['nodes', 'persistentvolumeclaims', 'configmaps', 'pods', 'pods/log'],
          verbs: ['get', 'list', 'watch'],
        },
        {
          apiGroups: [''],
          resources: ['persistentvolumes'],
          verbs: ['get', 'list', 'watch', 'create', 'patch', 'update', 'delete'],
        },
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        { apiGroups: ['storage.k8s.io'], resources: ['storageclasses'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'local-path-provisioner' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'local-path-provisioner' },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: LPP_NS }],
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'local-path-config', namespace: LPP_NS },
      data: {
        'config.json': JSON.stringify(config, null, 2),
        setup: 'set -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
        teardown: 'set -eu\nrm -rf "$VOL_DIR"\n',
        'helperPod.yaml': stringify(helperPod),
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'local-path-provisioner', namespace: LPP_NS },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'local-path-provisioner' } },
        template: {
          metadata: { labels: { app: 'local-path-provisioner' } },
          spec: {
            serviceAccountName: sa,
            containers: [
              {
                name: 'local-path-provisioner',
                image: PROVISIONER_IMAGE(),
                imagePullPolicy: 'IfNotPresent',
                command: [
                  '/usr/bin/local-path-provisioner',
                  '--debug',
                  'start',
                  '--config',
                  '/etc/config/config.json',
                  '--service-account-name',
                  sa,
                  '--helper-image',
                  HELPER_IMAGE,
                  '--configmap-name',
                  'local-path-config',
                ],
                env: [
                  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                  { name: 'CONFIG_MOUNT_PATH', value: '/etc/config/' },
                ],
                volumeMounts: [{ name: 'config', mountPath: '/etc/config/' }],
              },
            ],
            volumes: [{ name: 'config', configMap: { name: 'local-path-config' } }],
          },
        },
      },
    },
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: {
        name: 'local-path',
        annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' },
      },
      provisioner: 'rancher.io/local-path',
      volumeBindingMode: 'WaitForFirstConsumer',
      reclaimPolicy: 'Delete',
      // The provisioner's volumes are plain directories: growing one is only a change of the recorded size.
      allowVolumeExpansion: false,
    },
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: SHARED_STORAGE_CLASS },
      provisioner: 'rancher.io/local-path',
      volumeBindingMode: 'Immediate',
      reclaimPolicy: 'Delete',
    },
  ];
}

/** Every add-on manifest, one YAML stream for `kubectl apply --server-side`. */
export function addonManifests(plan: ClusterPlan, clusterDir: string): string {
  return [...coreDns(plan), ...localPath(plan, clusterDir)].map((d) => stringify(d)).join('---\n');
}
