import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { type KubeCluster, startKube } from '../harness/kube.ts';
import { processStartTime, type ServerProcess } from '../harness/proc.ts';
import { makeTempDir, removeDir } from '../harness/tmp.ts';
import { addonImages, addonManifests, sharedVolumes } from './addons.ts';
import { clusterTool } from './bins.ts';
import { nodePaths } from './config.ts';
import { POD_CPU_WEIGHT_SESSIONS, weighPodCgroup } from './cpu-weight.ts';
import { createNetwork, deleteNetwork, netnsPids, pickSubnet } from './net.ts';
import {
  importImages,
  type NodeControlPlane,
  type RunningNode,
  startContainerd,
  startKubelet,
  startKubeProxy,
  startNetworkPolicy,
} from './node.ts';
import { makePki } from './pki.ts';
import { type ClusterPlan, clusterId, clusterPlan } from './plan.ts';
import { sh } from './sh.ts';

export interface ClusterOptions {
  /** Node names are <name>-node-<i>. Default `holt`. */
  name?: string;
  /** Number of nodes (each a kubelet with its own containerd in its own network namespace). Default 1. */
  nodes?: number;
  /** State directory (default: a temp dir, removed by stop()). */
  dir?: string;
  /** The processes outlive this one (`make cluster-up`); `stopClusterAt(dir)` stops them. */
  detached?: boolean;
  /** Images of the local container engine loaded into every node (the kubelet never pulls). */
  images?: string[];
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface LocalCluster extends KubeCluster {
  plan: ClusterPlan;
  clusterDir: string;
  nodes: RunningNode[];
  /** Stops one node's kubelet, kube-proxy, kube-router and containers, as a machine that fails does. */
  stopNode(name: string): Promise<void>;
  /** Starts a stopped node's containerd, kubelet, kube-proxy and kube-router again, as a reboot does. */
  startNode(name: string): Promise<void>;
}

/** What `cluster-down` (or a test's stop) needs to find and remove everything the cluster made. */
const ClusterState = z.object({
  name: z.string(),
  id: z.string(),
  subnet: z.number(),
  nodes: z.number(),
  kubeconfig: z.string(),
  /** `start`: the process's start time, so teardown never signals another process given a reused pid. */
  pids: z.array(z.object({ name: z.string(), pid: z.number(), start: z.string().optional() })),
});
type ClusterState = z.infer<typeof ClusterState>;
const stateFile = (dir: string) => join(dir, 'cluster.json');

export async function startCluster(opts: ClusterOptions = {}): Promise<LocalCluster> {
  const log = opts.log ?? (() => {});
  const name = opts.name ?? 'holt';
  const dir = opts.dir ?? makeTempDir('cluster');
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const id = clusterId(name, `${process.pid}/${Date.now()}/${randomBytes(4).toString('hex')}`);
  const plan = clusterPlan(name, id, opts.nodes ?? 1, pickSubnet(id));
  const state: ClusterState = {
    name,
    id,
    subnet: Number(plan.hostIp.split('.')[2]),
    nodes: plan.nodes.length,
    kubeconfig: join(dir, 'control-plane', 'kubeconfig'),
    pids: [],
  };
  const save = () => writeFileSync(stateFile(dir), JSON.stringify(state, null, 2));
  const track = (p: ServerProcess) => {
    if (p.child.pid)
      state.pids.push({ name: p.name, pid: p.child.pid, start: processStartTime(p.child.pid) });
    save();
    return p;
  };
  save();
  let kube: KubeCluster | undefined;
  try {
    log(`network: bridge ${plan.bridge} ${plan.hostIp}, ${plan.nodes.length} node namespace(s)`);
    createNetwork(plan);
    const unweighed = weighPodCgroup();
    log(
      unweighed
        ? `cpu: pods keep the default weight (${unweighed})`
        : `cpu: the pods' cgroup weighs ${POD_CPU_WEIGHT_SESSIONS} host sessions`,
    );
    const pkiDir = join(dir, 'pki');
    mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
    const pki = makePki(pkiDir, {
      ips: ['127.0.0.1', plan.hostIp, plan.apiServiceIp],
      dns: [
        'localhost',
        'kubernetes',
        'kubernetes.default',
        'kubernetes.default.svc',
        `kubernetes.default.svc.${plan.clusterDomain}`,
      ],
    });
    const token = () => randomBytes(24).toString('hex');
    const kubeletTokens = plan.nodes.map(() => token());
    const proxyToken = token();
    const policyToken = token();
    log('control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler');
    kube = await startKube({
      controllerManager: true,
      scheduler: true,
      dir: join(dir, 'control-plane'),
      detached: opts.detached,
      nodes: {
        advertiseAddress: plan.hostIp,
        serviceCidr: plan.serviceCidr,
        pki,
        podEvictionSeconds: 30,
        tokens: [
          ...plan.nodes.map((n, i) => ({
            token: kubeletTokens[i]!,
            user: `system:node:${n.name}`,
            groups: ['system:nodes'],
          })),
          { token: proxyToken, user: 'system:kube-proxy' },
          // The policy engine watches pods, namespaces, nodes and NetworkPolicies everywhere: a test
          // cluster's component, given the admin group rather than a role of its own.
          { token: policyToken, user: 'system:kube-router', groups: ['system:masters'] },
        ],
      },
    });
    for (const p of kube.procs) track(p);
    const server = kube.server;

    const archives = addonImages(join(dir, 'addon-images'));
    if (opts.images?.length) {
      log(`images: saving ${opts.images.length} from the container engine`);
      const tar = join(dir, 'images.tar');
      sh(engine(), ['save', '-o', tar, ...opts.images], { timeoutMs: 600_000 });
      archives.push(tar);
    }

    const nodes: RunningNode[] = [];
    const controlPlanes: NodeControlPlane[] = [];
    for (const [i, n] of plan.nodes.entries()) {
      log(
        `node ${n.name} (${n.ip}, pods ${n.podCidr}): containerd, images, kubelet, kube-proxy, kube-router`,
      );
      const { paths, proc: containerd } = await startContainerd(dir, n, Boolean(opts.detached));
      track(containerd);
      importImages(paths, archives);
      const cp = {
        server: server.replace('127.0.0.1', plan.hostIp),
        caCert: pki.caCert,
        kubeletToken: kubeletTokens[i]!,
        proxyToken,
        policyToken,
      };
      controlPlanes.push(cp);
      const kubelet = track(await startKubelet(plan, n, paths, cp, Boolean(opts.detached)));
      const kubeProxy = track(await startKubeProxy(plan, n, paths, cp, Boolean(opts.detached)));
      const netpol = track(await startNetworkPolicy(n, paths, cp, Boolean(opts.detached)));
      nodes.push({ plan: n, paths, containerd, kubelet, kubeProxy, netpol });
    }
    await kube.kubectl(['wait', '--for=condition=Ready', 'node', '--all', '--timeout=120s']);
    log('add-ons: CoreDNS, local-path-provisioner (StorageClasses local-path, the default, and shared)');
    mkdirSync(sharedVolumes(dir), { recursive: true });
    await kube.kubectl(['apply', '--server-side', '-f', '-'], { input: addonManifests(plan, dir) });
    await kube.kubectl(['-n', 'kube-system', 'rollout', 'status', 'deployment/coredns', '--timeout=180s']);
    await kube.kubectl([
      '-n',
      'local-path-storage',
      'rollout',
      'status',
      'deployment/local-path-provisioner',
      '--timeout=180s',
    ]);
    const k = kube;
    return {
      ...k,
      plan,
      clusterDir: dir,
      nodes,
      async stopNode(nodeName) {
        const n = nodes.find((x) => x.plan.name === nodeName);
        if (!n) throw new Error(`no node ${nodeName}`);
        await n.netpol.stop();
        await n.kubeProxy.stop();
        await n.kubelet.stop();
        killContainers(n.paths.runcRoot);
        await n.containerd.stop();
      },
      async startNode(nodeName) {
        const i = nodes.findIndex((x) => x.plan.name === nodeName);
        if (i < 0) throw new Error(`no node ${nodeName}`);
        const n = nodes[i]!;
        const cp = controlPlanes[i]!;
        const detached = Boolean(opts.detached);
        // Its images stay in its containerd's root: nothing to import again.
        const { proc: containerd } = await startContainerd(dir, n.plan, detached);
        track(containerd);
        const kubelet = track(await startKubelet(plan, n.plan, n.paths, cp, detached));
        const kubeProxy = track(await startKubeProxy(plan, n.plan, n.paths, cp, detached));
        const netpol = track(await startNetworkPolicy(n.plan, n.paths, cp, detached));
        nodes[i] = { ...n, containerd, kubelet, kubeProxy, netpol };
      },
      async stop() {
        await stopClusterAt(dir);
        if (!opts.dir) removeDir(dir);
      },
    };
  } catch (err) {
    await stopClusterAt(dir).catch(() => {});
    if (!opts.dir) removeDir(dir);
    throw err;
  }
}

/** The project's images (scripts/images.sh --list), each checked to be built in the local engine. */
export function projectImages(): string[] {
  const script = join(import.meta.dirname, '..', '..', 'scripts', 'images.sh');
  const refs = sh('bash', [script, '--list'])
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const e = engine();
  const missing = refs.filter((r) => sh(e, ['image', 'inspect', r], { allowFail: true }) === '');
  if (refs.length === 0 || missing.length)
    throw new Error(`images not built (${missing.join(', ') || 'none listed'}): run \`make images\` first`);
  return refs;
}

/** docker, or podman where that is the engine. */
export function engine(): string {
  for (const e of ['docker', 'podman']) if (sh(e, ['version'], { allowFail: true }) !== '') return e;
  throw new Error('no container engine answers (docker or podman): run `make setup`');
}

/** Kills and removes every container of a node with runc itself (works with containerd gone too). */
function killContainers(runcRoot: string): void {
  const root = join(runcRoot, 'k8s.io');
  if (!existsSync(root)) return;
  const runc = clusterTool('RUNC');
  const ids = sh(runc, ['--root', root, 'list', '-q'], { allowFail: true }).split('\n').filter(Boolean);
  for (const c of ids) sh(runc, ['--root', root, 'delete', '--force', c], { allowFail: true });
}

/** TERM, then KILL after `graceMs`, each process only while its pid still names it. */
async function killPids(
  procs: { pid: number; start?: string | undefined }[],
  graceMs: number,
): Promise<void> {
  const alive = (p: { pid: number; start?: string | undefined }) => {
    const now = processStartTime(p.pid);
    return now !== undefined && (p.start === undefined || now === p.start);
  };
  const signal = (sig: NodeJS.Signals) => {
    for (const p of procs)
      if (alive(p))
        try {
          process.kill(p.pid, sig);
        } catch {
          // gone since the check
        }
  };
  signal('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (procs.some(alive) && Date.now() < deadline) await sleep(100);
  signal('SIGKILL');
}

/** Every mount point under `dir` (the kubelet's volumes, container root filesystems, pod netns). */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4]?.replace(/\\040/g, ' '))
    .filter((m): m is string => Boolean(m) && (m === dir || m!.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
}

/**
 * Stops the cluster whose state is in `dir` and removes what it made outside `dir`: the daemons, every
 * container, the mounts, the node namespaces, the bridge and its firewall rule. Safe to repeat.
 */
export async function stopClusterAt(dir: string): Promise<void> {
  if (!existsSync(stateFile(dir))) return;
  const state = ClusterState.parse(JSON.parse(readFileSync(stateFile(dir), 'utf8')));
  const plan = clusterPlan(state.name, state.id, state.nodes, state.subnet);
  const byRole = (suffix: string) => state.pids.filter((p) => p.name.endsWith(suffix));
  // Nodes first (so no kubelet restarts what is being removed), the control plane last.
  await killPids([...byRole('-kubelet'), ...byRole('-kube-proxy'), ...byRole('-kube-router')], 10_000);
  for (const n of plan.nodes) killContainers(nodePaths(dir, n).runcRoot);
  await killPids(byRole('-containerd'), 10_000);
  // Container shims, found now (so their pids are current).
  for (const n of plan.nodes)
    await killPids(
      netnsPids(n.netns).map((pid) => ({ pid, start: processStartTime(pid) })),
      2_000,
    );
  for (const m of mountsUnder(dir)) sh('umount', ['-l', m], { allowFail: true });
  const nodeRoles = ['-kubelet', '-kube-proxy', '-kube-router', '-containerd'];
  await killPids(state.pids.filter((p) => !nodeRoles.some((r) => p.name.endsWith(r))).reverse(), 10_000);
  deleteNetwork(plan);
  writeFileSync(stateFile(dir), JSON.stringify({ ...state, pids: [] }, null, 2));
}
