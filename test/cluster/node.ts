import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeBinary } from '../harness/bins.ts';
import { writeKubeconfig } from '../harness/kube.ts';
import { type ServerProcess, spawnServer, waitReady } from '../harness/proc.ts';
import { clusterTool } from './bins.ts';
import {
  cniConfig,
  containerdConfig,
  kubeletConfig,
  kubeProxyConfig,
  type NodePaths,
  nodePaths,
} from './config.ts';
import type { ClusterPlan, NodePlan } from './plan.ts';
import { sh } from './sh.ts';

export interface NodeControlPlane {
  server: string;
  caCert: string;
  kubeletToken: string;
  proxyToken: string;
  /** kube-router's (its user may read pods, namespaces, nodes and NetworkPolicies cluster-wide). */
  policyToken: string;
}

/** The daemons of one node, each started inside the node's network namespace. */
export interface RunningNode {
  plan: NodePlan;
  paths: NodePaths;
  containerd: ServerProcess;
  kubelet: ServerProcess;
  kubeProxy: ServerProcess;
  /** The NetworkPolicy engine (kube-router's firewall only: routes and Services stay as they are). */
  netpol: ServerProcess;
}

// The node's daemons need the sbin directories (runc, iptables, ip) whatever PATH the caller has.
const NODE_ENV = {
  ...process.env,
  PATH: `/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
};

/** nsenter --net only: the daemons share the host's mount namespace, so the kubelet's mounts (Secret
 * volumes, the containerd rootfs) are the ones containerd and runc see. */
function inNode(
  node: NodePlan,
  name: string,
  command: string,
  args: string[],
  dir: string,
  detached: boolean,
): ServerProcess {
  return spawnServer({
    name: `${node.name}-${name}`,
    command: 'nsenter',
    args: [`--net=/run/netns/${node.netns}`, '--', command, ...args],
    dir,
    env: NODE_ENV,
    detached,
  });
}

export const ctr = (p: NodePaths, args: string[], opts: { allowFail?: boolean; timeoutMs?: number } = {}) =>
  sh(clusterTool('CTR'), ['--address', p.containerdSock, '--namespace', 'k8s.io', ...args], opts);

export async function startContainerd(
  clusterDir: string,
  node: NodePlan,
  detached: boolean,
): Promise<{ paths: NodePaths; proc: ServerProcess }> {
  const p = nodePaths(clusterDir, node);
  for (const d of [
    p.containerdRoot,
    p.containerdState,
    p.cniConfDir,
    p.cniDataDir,
    p.kubeletRoot,
    p.podLogs,
    p.volumes,
  ])
    mkdirSync(d, { recursive: true });
  // An empty resolv.conf: pods with dnsPolicy Default get no resolver of the host's.
  writeFileSync(p.resolvConf, '');
  writeFileSync(join(p.cniConfDir, '10-holt.conflist'), cniConfig(node, p));
  const config = join(p.dir, 'containerd.toml');
  writeFileSync(config, containerdConfig(p, clusterTool('CNI_BIN_DIR'), clusterTool('RUNC')));
  const proc = inNode(node, 'containerd', clusterTool('CONTAINERD'), ['--config', config], p.dir, detached);
  await waitReady(
    proc,
    async () => existsSync(p.containerdSock) && ctr(p, ['version'], { allowFail: true }) !== '',
    60_000,
    200,
  );
  return { paths: p, proc };
}

/** Loads `docker save` archives into the node's containerd (the kubelet never pulls: no registry). */
export function importImages(p: NodePaths, archives: string[]): void {
  for (const a of archives) ctr(p, ['images', 'import', '--no-unpack=false', a], { timeoutMs: 600_000 });
}

/** A node component's kubeconfig (a static token user) and its config file, in the node's folder. */
function componentFiles(p: NodePaths, name: string, cp: NodeControlPlane, user: string, token: string) {
  const kubeconfig = join(p.dir, `${name}.kubeconfig`);
  writeKubeconfig(kubeconfig, cp.server, cp.caCert, user, token);
  return { kubeconfig, config: join(p.dir, `${name}.yaml`) };
}

export async function startKubelet(
  plan: ClusterPlan,
  node: NodePlan,
  p: NodePaths,
  cp: NodeControlPlane,
  detached: boolean,
): Promise<ServerProcess> {
  const { kubeconfig, config } = componentFiles(
    p,
    'kubelet',
    cp,
    `system:node:${node.name}`,
    cp.kubeletToken,
  );
  writeFileSync(config, kubeletConfig(plan, node, p, cp.caCert));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const proc = inNode(
      node,
      'kubelet',
      kubeBinary('kubelet'),
      [
        `--config=${config}`,
        `--kubeconfig=${kubeconfig}`,
        `--root-dir=${p.kubeletRoot}`,
        `--cert-dir=${p.kubeletCerts}`,
        `--hostname-override=${node.name}`,
        `--node-ip=${node.ip}`,
        '--v=1',
      ],
      p.dir,
      detached,
    );
    try {
      await waitReady(proc, async () => (await fetch(`http://${node.ip}:10248/healthz`)).ok, 120_000, 250);
      return proc;
    } catch (e) {
      // containerd answers before its CRI plugin has loaded its state (slow on a restarted, busy node):
      // the kubelet then exits at once. Started again, as systemd would, until the deadline.
      if (!/server is not initialized yet/.test(String(e)) || Date.now() > deadline) throw e;
      await sleep(1000);
    }
  }
}

export async function startKubeProxy(
  plan: ClusterPlan,
  node: NodePlan,
  p: NodePaths,
  cp: NodeControlPlane,
  detached: boolean,
): Promise<ServerProcess> {
  const { kubeconfig, config } = componentFiles(p, 'kube-proxy', cp, 'system:kube-proxy', cp.proxyToken);
  writeFileSync(config, kubeProxyConfig(plan, node, kubeconfig));
  const proc = inNode(
    node,
    'kube-proxy',
    kubeBinary('kube-proxy'),
    [`--config=${config}`, '--v=1'],
    p.dir,
    detached,
  );
  await waitReady(proc, async () => (await fetch(`http://${node.ip}:10256/healthz`)).ok, 60_000, 250);
  return proc;
}

/**
 * kube-router with only its firewall on, in the node's namespace: NetworkPolicies become iptables
 * rules and ipsets there, as on a cluster with a policy-enforcing CNI. The bridge CNI and kube-proxy
 * keep doing pod networking and Services.
 */
export async function startNetworkPolicy(
  node: NodePlan,
  p: NodePaths,
  cp: NodeControlPlane,
  detached: boolean,
): Promise<ServerProcess> {
  const { kubeconfig } = componentFiles(p, 'kube-router', cp, 'system:kube-router', cp.policyToken);
  const health = 20244;
  const proc = inNode(
    node,
    'kube-router',
    clusterTool('KUBE_ROUTER'),
    [
      `--kubeconfig=${kubeconfig}`,
      `--hostname-override=${node.name}`,
      '--run-firewall=true',
      '--run-router=false',
      '--run-service-proxy=false',
      `--health-port=${health}`,
      '--iptables-sync-period=1m',
      '--v=1',
    ],
    p.dir,
    detached,
  );
  await waitReady(proc, async () => (await fetch(`http://${node.ip}:${health}/healthz`)).ok, 60_000, 250);
  return proc;
}
