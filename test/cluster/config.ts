import { stringify } from 'yaml';
import type { ClusterPlan, NodePlan } from './plan.ts';

/** The files of one node: pure builders of containerd's, CNI's, the kubelet's and kube-proxy's config. */
export interface NodePaths {
  dir: string;
  containerdRoot: string;
  containerdState: string;
  containerdSock: string;
  runcRoot: string;
  cniConfDir: string;
  cniDataDir: string;
  kubeletRoot: string;
  kubeletCerts: string;
  podLogs: string;
  volumePlugins: string;
  /** Where the local-path provisioner puts this node's volumes. */
  volumes: string;
  resolvConf: string;
}

export function nodePaths(clusterDir: string, node: NodePlan): NodePaths {
  const dir = `${clusterDir}/nodes/${node.name}`;
  return {
    dir,
    containerdRoot: `${dir}/containerd/root`,
    containerdState: `${dir}/containerd/state`,
    containerdSock: `${dir}/containerd/containerd.sock`,
    runcRoot: `${dir}/containerd/runc`,
    cniConfDir: `${dir}/cni/conf`,
    cniDataDir: `${dir}/cni/ipam`,
    kubeletRoot: `${dir}/kubelet`,
    kubeletCerts: `${dir}/kubelet-pki`,
    podLogs: `${dir}/pod-logs`,
    volumePlugins: `${dir}/volume-plugins`,
    volumes: `${dir}/volumes`,
    resolvConf: `${dir}/resolv.conf`,
  };
}

export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10';

/**
 * containerd with the CRI plugin, everything under the node's directory. restrict_oom_score_adj:
 * this sandbox refuses a negative oom_score_adj even to root, and runc then fails to start anything.
 */
export function containerdConfig(p: NodePaths, cniBinDir: string, runc: string): string {
  return `version = 2
root = "${p.containerdRoot}"
state = "${p.containerdState}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "${p.containerdSock}"
[ttrpc]
  address = "${p.containerdSock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "${p.dir}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${cniBinDir}"
    conf_dir = "${p.cniConfDir}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "${runc}"
        Root = "${p.runcRoot}"
        SystemdCgroup = false
`;
}

/** A bridge per node (cni0 inside the node's namespace), its own pod range, hairpin for Services. */
export function cniConfig(node: NodePlan, p: NodePaths): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'holt',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: node.podCidr, gateway: node.podGateway }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: p.cniDataDir,
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

/**
 * The kubelet: cgroupfs without QoS cgroups (this sandbox's hybrid cgroups), only the API server
 * may call it (client certificates of the cluster CA), no negative oom_score_adj, no eviction
 * thresholds (a CI machine's disk may be fuller than a real node's would be). In-place pod resize is
 * off: without pod cgroups (cgroupsPerQOS false) kubelet 1.34 dereferences a nil pod cgroup in its
 * resize path when a pod is force-deleted, and dies (the R5 drill met it).
 */
export function kubeletConfig(plan: ClusterPlan, node: NodePlan, p: NodePaths, caCert: string): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    cgroupDriver: 'cgroupfs',
    cgroupsPerQOS: false,
    featureGates: { InPlacePodVerticalScaling: false },
    enforceNodeAllocatable: [],
    failSwapOn: false,
    failCgroupV1: false,
    oomScoreAdj: 0,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: false },
      x509: { clientCAFile: caCert },
    },
    authorization: { mode: 'AlwaysAllow' },
    containerRuntimeEndpoint: `unix://${p.containerdSock}`,
    address: node.ip,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: node.ip,
    healthzPort: 10248,
    clusterDNS: [plan.dnsServiceIp],
    clusterDomain: plan.clusterDomain,
    resolvConf: p.resolvConf,
    podLogsDir: p.podLogs,
    volumePluginDir: p.volumePlugins,
    serializeImagePulls: false,
    evictionHard: { 'memory.available': '0%', 'nodefs.available': '0%', 'imagefs.available': '0%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    localStorageCapacityIsolation: false,
    maxPods: 110,
    registerNode: true,
  });
}

export function kubeProxyConfig(plan: ClusterPlan, node: NodePlan, kubeconfig: string): string {
  return stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig },
    mode: 'iptables',
    clusterCIDR: plan.clusterCidr,
    hostnameOverride: node.name,
    healthzBindAddress: `${node.ip}:10256`,
    metricsBindAddress: '127.0.0.1:10249',
    // 0: leave the host-wide conntrack table size alone (it is not the node namespace's to set).
    conntrack: { maxPerCore: 0, min: 0 },
  });
}
