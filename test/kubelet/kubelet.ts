import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { constants, homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoordinationV1Api,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Container,
  type V1EnvVar,
  V1MicroTime,
  type V1Pod,
  type V1Probe,
  type V1Volume,
  Watch,
} from '@kubernetes/client-node';
import { freePort } from '../harness/ports.ts';
import { pidDir } from '../harness/proc.ts';
import { type PathMap, rewritePaths } from './paths.ts';

/**
 * A small kubelet for end-to-end tests: it registers a Node, binds the unscheduled pods of one
 * namespace to it, and runs each container as a local process. What a container image would hold
 * is mapped onto this machine: a runtime image's `/opt/holt` is this repository (so
 * `/opt/holt/bin/holt` runs `bin/holt` on the same Node), volumes are local directories (a PVC is
 * one directory per claim, shared by every pod that mounts it; ConfigMaps and Secrets are written
 * as files; an emptyDir is a fresh directory), and every mount path in a container's command, args,
 * env and workingDir is rewritten to its local directory. Each container port gets a free local
 * port: env vars naming the port (`*PORT` = the container port) and the probes use it.
 *
 * Not emulated: images other than the runtime images (their pods stay Pending with
 * `UnsupportedImage`), networking (no pod IPs; Services do not route), liveness-probe restarts,
 * read-only mounts, users and security contexts.
 */
export interface TestKubeletOptions {
  kubeconfig: KubeConfig;
  namespace: string;
  /** Where pod and volume directories live (removed by stop() unless `keep`). */
  root: string;
  /** The repository whose `bin/holt` the runtime images run. */
  repoRoot: string;
  /** Images whose `/opt/holt` is this repository. */
  runtimeImages: string[];
  /** Paths every image is taken to contain (container path → local path); mounts win over them. */
  imagePaths?: Record<string, string>;
  nodeName?: string;
  /** How often pods are re-listed and probes run. */
  syncMs?: number;
  log?: (line: string) => void;
}

/** One process the kubelet started, for tests that prove nothing is left behind. */
export interface KubeletProcess {
  pid: number;
  pod: string;
  container: string;
  exited: boolean;
  exitCode: number | null;
}

/** Where a pod's container ports ended up on this machine. */
export interface PortMapping {
  pod: string;
  container: string;
  containerPort: number;
  localPort: number;
}

interface ContainerRun {
  spec: V1Container;
  init: boolean;
  ports: Map<number, number>;
  argv?: string[];
  env?: Record<string, string>;
  cwd?: string;
  proc?: ChildProcess;
  record?: KubeletProcess;
  exitP?: Promise<void>;
  restarts: number;
  lastExit?: { code: number; at: string };
  startedAt?: string;
  ready: boolean;
  nextStart: number;
  waiting?: { reason: string; message: string };
}

interface PodRun {
  uid: string;
  name: string;
  namespace: string;
  pod: V1Pod;
  dir: string;
  volumes?: Map<string, string>;
  inits: ContainerRun[];
  mains: ContainerRun[];
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  initDone: boolean;
  startTime: string;
  terminating?: Promise<void>;
  lastStatus: string;
  message?: string;
}

const now = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const errText = (e: unknown) =>
  e instanceof Error
    ? (e as Error & { body?: unknown }).body
      ? `${e.message}: ${String((e as Error & { body?: unknown }).body)}`
      : e.message
    : String(e);
const statusCode = (e: unknown): number | undefined =>
  typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'number' ? e.code : undefined;

export class TestKubelet {
  readonly nodeName: string;
  readonly #o: TestKubeletOptions;
  readonly #core: CoreV1Api;
  readonly #coord: CoordinationV1Api;
  readonly #pods = new Map<string, PodRun>();
  /** uids finished here (deleted or terminal): never started again. */
  readonly #done = new Set<string>();
  readonly #chains = new Map<string, Promise<void>>();
  readonly #processes: KubeletProcess[] = [];
  readonly #ports: PortMapping[] = [];
  readonly #runtimeRoot: string;
  #stopped = false;
  #watch?: AbortController;
  #loop?: Promise<void>;
  #heartbeat?: NodeJS.Timeout;
  readonly errors: string[] = [];

  constructor(o: TestKubeletOptions) {
    this.#o = o;
    this.nodeName = o.nodeName ?? 'test-kubelet';
    this.#core = o.kubeconfig.makeApiClient(CoreV1Api);
    this.#coord = o.kubeconfig.makeApiClient(CoordinationV1Api);
    this.#runtimeRoot = join(o.root, 'image', 'opt', 'holt');
  }

  #log(line: string): void {
    this.#o.log?.(`kubelet: ${line}`);
  }

  /** The local directory of a PersistentVolumeClaim (created on first use, shared by its pods). */
  claimDir(namespace: string, claim: string): string {
    const dir = join(this.#o.root, 'claims', namespace, claim);
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  /** Every process started so far (running or not). */
  processes(): KubeletProcess[] {
    return this.#processes.map((p) => ({ ...p }));
  }

  /** Processes still running. */
  running(): KubeletProcess[] {
    return this.processes().filter((p) => !p.exited);
  }

  ports(): PortMapping[] {
    return [...this.#ports];
  }

  /** The log of a pod's container (the last `lines`), for test failure messages. */
  logs(pod: string, container?: string, lines = 40): string {
    const out: string[] = [];
    for (const r of this.#pods.values()) {
      if (r.name !== pod) continue;
      for (const c of [...r.inits, ...r.mains]) {
        if (container && c.spec.name !== container) continue;
        try {
          const text = readFileSync(join(r.dir, `${c.spec.name}.log`), 'utf8')
            .trimEnd()
            .split('\n');
          out.push(`--- ${pod}/${c.spec.name}`, ...text.slice(-lines));
        } catch {
          // not started
        }
      }
    }
    return out.join('\n');
  }

  /** Log tails of every pod, for a failing test's message. */
  allLogs(lines = 15): string {
    return [...new Set([...this.#pods.values()].map((r) => r.name))]
      .map((n) => this.logs(n, undefined, lines))
      .join('\n');
  }

  async start(): Promise<void> {
    mkdirSync(this.#o.root, { recursive: true });
    this.#makeRuntimeImage();
    await this.#registerNode();
    this.#heartbeat = setInterval(() => void this.#beat().catch(() => undefined), 10_000);
    this.#loop = this.#run();
  }

  /** The runtime image's /opt/holt: symlinks to this repository's top-level entries (cheap to `cp -a`). */
  #makeRuntimeImage(): void {
    mkdirSync(this.#runtimeRoot, { recursive: true });
    for (const e of readdirSync(this.#o.repoRoot)) {
      if (e === '.git') continue;
      symlinkSync(join(this.#o.repoRoot, e), join(this.#runtimeRoot, e));
    }
  }

  async #registerNode(): Promise<void> {
    try {
      await this.#core.createNode({
        body: {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: {
            name: this.nodeName,
            labels: { 'kubernetes.io/hostname': this.nodeName, 'kubernetes.io/os': 'linux' },
          },
        },
      });
    } catch (e) {
      if (statusCode(e) !== 409) throw e;
    }
    await this.#beat();
  }

  /** Node status and Lease heartbeats, so the node lifecycle controller never marks the node unreachable. */
  async #beat(): Promise<void> {
    const t = now();
    await this.#core.patchNodeStatus(
      {
        name: this.nodeName,
        body: {
          status: {
            capacity: { cpu: '8', memory: '16Gi', pods: '110' },
            allocatable: { cpu: '8', memory: '16Gi', pods: '110' },
            conditions: [
              {
                type: 'Ready',
                status: 'True',
                reason: 'KubeletReady',
                message: 'test kubelet is posting ready status',
                lastHeartbeatTime: t,
                lastTransitionTime: t,
              },
            ],
            addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: this.nodeName, namespace: 'kube-node-lease' },
      spec: { holderIdentity: this.nodeName, leaseDurationSeconds: 40, renewTime: new V1MicroTime() },
    };
    try {
      const cur = await this.#coord.readNamespacedLease({
        name: this.nodeName,
        namespace: 'kube-node-lease',
      });
      await this.#coord.replaceNamespacedLease({
        name: this.nodeName,
        namespace: 'kube-node-lease',
        body: { ...lease, metadata: { ...lease.metadata, resourceVersion: cur.metadata?.resourceVersion } },
      });
    } catch (e) {
      if (statusCode(e) !== 404) throw e;
      await this.#coord.createNamespacedLease({ namespace: 'kube-node-lease', body: lease });
    }
  }

  /** Watch (for quick reactions) plus a periodic re-list and status pass (level-triggered). */
  async #run(): Promise<void> {
    const ns = this.#o.namespace;
    const startWatch = async () => {
      if (this.#stopped) return;
      try {
        this.#watch = await new Watch(this.#o.kubeconfig).watch(
          `/api/v1/namespaces/${ns}/pods`,
          { allowWatchBookmarks: false },
          (_type: string, pod: V1Pod) => this.#enqueue(pod),
          () => {
            if (!this.#stopped) setTimeout(() => void startWatch(), 1000);
          },
        );
      } catch {
        if (!this.#stopped) setTimeout(() => void startWatch(), 1000);
      }
    };
    await startWatch();
    while (!this.#stopped) {
      try {
        const list = await this.#core.listNamespacedPod({ namespace: ns });
        const seen = new Set<string>();
        for (const p of list.items) {
          if (p.metadata?.uid) seen.add(p.metadata.uid);
          this.#enqueue(p);
        }
        // Pods deleted from the API without us finishing them (force deletion): stop their processes.
        for (const r of this.#pods.values())
          if (!seen.has(r.uid)) this.#serial(r.uid, () => this.#terminate(r, 2, false));
        for (const r of this.#pods.values()) this.#serial(r.uid, () => this.#tick(r));
      } catch (e) {
        if (!this.#stopped) this.#log(`sync failed: ${errText(e)}`);
      }
      await sleep(this.#o.syncMs ?? 1000);
    }
  }

  /** Runs `fn` after the previous work on the same pod (one pod is never handled concurrently). */
  #serial(uid: string, fn: () => Promise<void>): void {
    const prev = this.#chains.get(uid) ?? Promise.resolve();
    const next = prev.then(fn).catch((e: unknown) => {
      const msg = `pod ${uid}: ${errText(e)}`;
      this.errors.push(msg);
      this.#log(msg);
    });
    this.#chains.set(uid, next);
  }

  #enqueue(pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    if (!uid || this.#stopped) return;
    this.#serial(uid, () => this.#sync(pod));
  }

  async #sync(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? this.#o.namespace;
    const node = pod.spec?.nodeName;
    if (node && node !== this.nodeName) return;
    const run = this.#pods.get(uid);
    if (run) run.pod = pod;
    if (pod.metadata?.deletionTimestamp) {
      const grace = pod.metadata.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
      if (run) await this.#terminate(run, grace, true);
      else if (node === this.nodeName) await this.#finalizeDelete(namespace, name, uid);
      return;
    }
    if (run || this.#done.has(uid)) return;
    const phase = pod.status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') return;
    if (!node) {
      await this.#core.createNamespacedPodBinding({
        name,
        namespace,
        body: {
          apiVersion: 'v1',
          kind: 'Binding',
          metadata: { name, namespace, uid },
          target: { apiVersion: 'v1', kind: 'Node', name: this.nodeName },
        },
      });
      pod.spec = { ...pod.spec, nodeName: this.nodeName, containers: pod.spec?.containers ?? [] };
    }
    const dir = join(this.#o.root, 'pods', `${namespace}_${name}_${uid.slice(0, 8)}`);
    mkdirSync(dir, { recursive: true });
    const mk = (spec: V1Container, init: boolean): ContainerRun => ({
      spec,
      init,
      ports: new Map(),
      restarts: 0,
      ready: false,
      nextStart: 0,
    });
    const r: PodRun = {
      uid,
      name,
      namespace,
      pod,
      dir,
      inits: (pod.spec?.initContainers ?? []).map((c) => mk(c, true)),
      mains: (pod.spec?.containers ?? []).map((c) => mk(c, false)),
      phase: 'Pending',
      initDone: false,
      startTime: now(),
      lastStatus: '',
    };
    this.#pods.set(uid, r);
    this.#log(`pod ${namespace}/${name} admitted`);
    await this.#tick(r);
  }

  /** One pass over a pod: start or restart what should run, probe, and write status when it changed. */
  async #tick(r: PodRun): Promise<void> {
    if (r.terminating || this.#stopped) return;
    if (r.phase === 'Succeeded' || r.phase === 'Failed') return;
    const policy = r.pod.spec?.restartPolicy ?? 'Always';
    try {
      r.volumes ??= await this.#volumes(r);
      r.message = undefined;
    } catch (e) {
      r.message = `volumes: ${errText(e)}`;
      await this.#writeStatus(r);
      return;
    }
    if (!r.initDone) {
      const next = r.inits.find((c) => !(c.lastExit?.code === 0));
      if (!next) r.initDone = true;
      else if (!next.proc) {
        if (next.lastExit && policy === 'Never') r.phase = 'Failed';
        else await this.#startContainer(r, next);
      }
    }
    if (r.initDone) {
      for (const c of r.mains) {
        if (c.proc) continue;
        const restart =
          !c.lastExit || policy === 'Always' || (policy === 'OnFailure' && c.lastExit.code !== 0);
        if (restart) await this.#startContainer(r, c);
      }
      for (const c of r.mains) c.ready = c.proc ? await this.#probe(c, c.spec.readinessProbe) : false;
      if (r.mains.every((c) => !c.proc && c.lastExit && policy !== 'Always')) {
        const ok = r.mains.every((c) => c.lastExit?.code === 0);
        if (ok || policy === 'Never') r.phase = ok ? 'Succeeded' : 'Failed';
      } else if (r.mains.some((c) => c.proc)) r.phase = 'Running';
    }
    await this.#writeStatus(r);
    if (r.phase === 'Succeeded' || r.phase === 'Failed') {
      this.#done.add(r.uid);
      this.#log(`pod ${r.namespace}/${r.name} ${r.phase}`);
    }
  }

  /** Each volume as a local directory. */
  async #volumes(r: PodRun): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const v of r.pod.spec?.volumes ?? []) out.set(v.name, await this.#volume(r, v));
    return out;
  }

  async #volume(r: PodRun, v: V1Volume): Promise<string> {
    const local = join(r.dir, 'volumes', v.name);
    if (v.persistentVolumeClaim) return this.claimDir(r.namespace, v.persistentVolumeClaim.claimName);
    if (v.emptyDir) {
      mkdirSync(local, { recursive: true });
      return local;
    }
    const write = (data: Record<string, Buffer>, items?: { key: string; path: string }[]) => {
      rmSync(local, { recursive: true, force: true });
      mkdirSync(local, { recursive: true });
      const entries = items
        ? items.map((i) => [i.path, data[i.key]] as const)
        : Object.entries(data).map(([k, d]) => [k, d] as const);
      for (const [path, d] of entries) {
        if (d === undefined) continue;
        mkdirSync(dirname(join(local, path)), { recursive: true });
        writeFileSync(join(local, path), d);
      }
      return local;
    };
    if (v.configMap) {
      const cm = await this.#core.readNamespacedConfigMap({
        name: v.configMap.name ?? '',
        namespace: r.namespace,
      });
      const data: Record<string, Buffer> = {};
      for (const [k, s] of Object.entries(cm.data ?? {})) data[k] = Buffer.from(s, 'utf8');
      for (const [k, s] of Object.entries(cm.binaryData ?? {})) data[k] = Buffer.from(s, 'base64');
      return write(data, v.configMap.items);
    }
    if (v.secret) {
      const s = await this.#core.readNamespacedSecret({
        name: v.secret.secretName ?? '',
        namespace: r.namespace,
      });
      const data: Record<string, Buffer> = {};
      for (const [k, b] of Object.entries(s.data ?? {})) data[k] = Buffer.from(b, 'base64');
      return write(data, v.secret.items);
    }
    throw new Error(`volume ${v.name}: unsupported volume type`);
  }

  /** The container's paths: its mounts, then what its image contains. */
  #pathMap(r: PodRun, c: V1Container): PathMap {
    const map = new Map<string, string>();
    for (const m of c.volumeMounts ?? []) {
      const dir = r.volumes?.get(m.name);
      if (!dir) throw new Error(`mount ${m.mountPath}: no volume ${m.name}`);
      map.set(m.mountPath, m.subPath ? join(dir, m.subPath) : dir);
    }
    const image = (p: string, local: string) => {
      if (![...map.keys()].some((k) => k === p || p.startsWith(`${k}/`))) map.set(p, local);
    };
    if (this.#o.runtimeImages.includes(c.image ?? '')) image('/opt/holt', this.#runtimeRoot);
    for (const [p, local] of Object.entries(this.#o.imagePaths ?? {})) image(p, local);
    return map;
  }

  async #env(r: PodRun, c: V1Container): Promise<Record<string, string>> {
    const env: Record<string, string> = {};
    const ns = r.namespace;
    const secrets = new Map<string, Record<string, string>>();
    const secret = async (name: string) => {
      let d = secrets.get(name);
      if (!d) {
        const s = await this.#core.readNamespacedSecret({ name, namespace: ns });
        d = Object.fromEntries(
          Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
        );
        secrets.set(name, d);
      }
      return d;
    };
    const configMap = async (name: string) =>
      (await this.#core.readNamespacedConfigMap({ name, namespace: ns })).data ?? {};
    for (const from of c.envFrom ?? []) {
      const data = from.configMapRef
        ? await configMap(from.configMapRef.name ?? '')
        : from.secretRef
          ? await secret(from.secretRef.name ?? '')
          : {};
      for (const [k, v] of Object.entries(data)) env[`${from.prefix ?? ''}${k}`] = v;
    }
    const field = (path: string): string => {
      const m = r.pod.metadata;
      if (path === 'metadata.name') return m?.name ?? '';
      if (path === 'metadata.namespace') return m?.namespace ?? ns;
      if (path === 'metadata.uid') return m?.uid ?? '';
      if (path === 'spec.nodeName') return this.nodeName;
      if (path === 'spec.serviceAccountName') return r.pod.spec?.serviceAccountName ?? 'default';
      if (path === 'status.podIP' || path === 'status.hostIP') return '127.0.0.1';
      const label = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
      if (label) return (label[1] === 'labels' ? m?.labels : m?.annotations)?.[label[2] ?? ''] ?? '';
      throw new Error(`fieldRef ${path} is not supported`);
    };
    const value = async (e: V1EnvVar): Promise<string | undefined> => {
      if (e.value !== undefined)
        return e.value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, n: string) => env[n] ?? m);
      const f = e.valueFrom;
      if (!f) return '';
      if (f.secretKeyRef) {
        const v = (await secret(f.secretKeyRef.name ?? ''))[f.secretKeyRef.key];
        if (v === undefined && !f.secretKeyRef.optional)
          throw new Error(`secret ${f.secretKeyRef.name} has no key ${f.secretKeyRef.key}`);
        return v;
      }
      if (f.configMapKeyRef) {
        const v = (await configMap(f.configMapKeyRef.name ?? ''))[f.configMapKeyRef.key];
        if (v === undefined && !f.configMapKeyRef.optional)
          throw new Error(`configmap ${f.configMapKeyRef.name} has no key ${f.configMapKeyRef.key}`);
        return v;
      }
      if (f.fieldRef) return field(f.fieldRef.fieldPath);
      throw new Error(`env ${e.name}: unsupported valueFrom`);
    };
    for (const e of c.env ?? []) {
      const v = await value(e);
      if (v !== undefined) env[e.name] = v;
    }
    return env;
  }

  async #startContainer(r: PodRun, c: ContainerRun): Promise<void> {
    if (Date.now() < c.nextStart) return;
    const spec = c.spec;
    try {
      if (!c.argv) {
        if (!this.#o.runtimeImages.includes(spec.image ?? ''))
          throw Object.assign(
            new Error(`image ${spec.image} cannot run here (only ${this.#o.runtimeImages.join(', ')})`),
            {
              reason: 'UnsupportedImage',
            },
          );
        if (!spec.command?.length)
          throw Object.assign(new Error('no command: image entrypoints are not known to the test kubelet'), {
            reason: 'UnsupportedImage',
          });
        const paths = this.#pathMap(r, spec);
        for (const p of spec.ports ?? []) {
          if (!c.ports.has(p.containerPort)) {
            const local = await freePort();
            c.ports.set(p.containerPort, local);
            this.#ports.push({
              pod: r.name,
              container: spec.name,
              containerPort: p.containerPort,
              localPort: local,
            });
          }
        }
        const env = await this.#env(r, spec);
        for (const [k, v] of Object.entries(env)) {
          let val = rewritePaths(v, paths);
          if (/PORT$/.test(k) && /^\d+$/.test(val)) {
            const n = Number(val);
            if (!c.ports.has(n) && k === 'HOLT_HEALTH_PORT') {
              const local = await freePort();
              c.ports.set(n, local);
              this.#ports.push({ pod: r.name, container: spec.name, containerPort: n, localPort: local });
            }
            val = String(c.ports.get(n) ?? n);
          }
          env[k] = val;
        }
        const tmp = paths.get('/tmp');
        c.env = {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: r.dir,
          HOSTNAME: r.name,
          HOLT_CACHE_DIR: process.env.HOLT_CACHE_DIR ?? join(homedir(), '.cache', 'holt'),
          ...(tmp ? { TMPDIR: tmp } : {}),
          ...env,
        };
        c.argv = [...(spec.command ?? []), ...(spec.args ?? [])].map((a) => rewritePaths(a, paths));
        c.cwd = spec.workingDir ? rewritePaths(spec.workingDir, paths) : r.dir;
        mkdirSync(c.cwd, { recursive: true });
      }
      c.waiting = undefined;
    } catch (e) {
      const reason = (e as { reason?: string }).reason ?? 'CreateContainerConfigError';
      c.waiting = { reason, message: errText(e) };
      c.nextStart = Date.now() + 2000;
      return;
    }
    const [cmd, ...args] = c.argv;
    const fd = openSync(join(r.dir, `${spec.name}.log`), 'a');
    const child = spawn(cmd ?? '', args, {
      cwd: c.cwd,
      env: c.env,
      stdio: ['ignore', fd, fd],
      // Its own process group: stopping the container stops whatever it started.
      detached: true,
    });
    const record: KubeletProcess = {
      pid: child.pid ?? -1,
      pod: `${r.namespace}/${r.name}`,
      container: spec.name,
      exited: child.pid === undefined,
      exitCode: null,
    };
    this.#processes.push(record);
    const pd = pidDir();
    const pidFile = pd && child.pid ? join(pd, String(child.pid)) : undefined;
    if (pidFile) writeFileSync(pidFile, `kubelet ${record.pod}/${spec.name}\n`);
    c.proc = child;
    c.record = record;
    c.startedAt = now();
    c.ready = false;
    c.exitP = new Promise<void>((resolve) => {
      let fired = false;
      const done = (code: number) => {
        if (fired) return;
        fired = true;
        record.exited = true;
        record.exitCode = code;
        if (pidFile) rmSync(pidFile, { force: true });
        // Whatever the container left running dies with it.
        if (child.pid) {
          try {
            process.kill(-child.pid, 'SIGKILL');
          } catch {
            // group already gone
          }
        }
        c.proc = undefined;
        c.ready = false;
        c.lastExit = { code, at: now() };
        if (!r.terminating) {
          c.restarts += c.init ? 0 : 1;
          c.nextStart = Date.now() + Math.min(10_000, 500 * 2 ** Math.min(c.restarts, 5));
          this.#log(`${record.pod}/${spec.name} exited ${code}`);
          this.#serial(r.uid, () => this.#tick(r));
        }
        resolve();
      };
      child.once('exit', (code, signal) =>
        done(code ?? 128 + (signal ? (constants.signals[signal] ?? 15) : 1)),
      );
      child.once('error', (e) => {
        c.waiting = { reason: 'RunContainerError', message: e.message };
        done(127);
      });
    });
    this.#log(`${record.pod}/${spec.name} started (pid ${child.pid})`);
  }

  /** A readiness (or startup) probe: httpGet on the mapped port, exec as a local command, tcp as connect. */
  async #probe(c: ContainerRun, p: V1Probe | undefined): Promise<boolean> {
    if (!p) return true;
    const port = (v: number | string | undefined): number | undefined => {
      const n =
        typeof v === 'number'
          ? v
          : /^\d+$/.test(String(v))
            ? Number(v)
            : c.spec.ports?.find((x) => x.name === v)?.containerPort;
      return n === undefined ? undefined : (c.ports.get(n) ?? n);
    };
    try {
      if (p.httpGet) {
        const local = port(p.httpGet.port);
        if (local === undefined) return false;
        const res = await fetch(`http://127.0.0.1:${local}${p.httpGet.path ?? '/'}`, {
          signal: AbortSignal.timeout((p.timeoutSeconds ?? 1) * 1000),
        });
        await res.arrayBuffer();
        return res.status >= 200 && res.status < 400;
      }
      if (p.tcpSocket) {
        const local = port(p.tcpSocket.port);
        if (local === undefined) return false;
        const { createConnection } = await import('node:net');
        return await new Promise<boolean>((resolve) => {
          const s = createConnection({ host: '127.0.0.1', port: local }, () => {
            s.destroy();
            resolve(true);
          });
          s.once('error', () => resolve(false));
        });
      }
      // exec probes would need the container's filesystem: treated as passing while running.
      return true;
    } catch {
      return false;
    }
  }

  /** A container's status as JSON (times as strings: the patch body is sent as it is). */
  #containerStatus(c: ContainerRun): Record<string, unknown> {
    const state = c.proc
      ? { running: { startedAt: c.startedAt } }
      : c.lastExit && !c.waiting
        ? {
            terminated: {
              exitCode: c.lastExit.code,
              reason: c.lastExit.code === 0 ? 'Completed' : 'Error',
              startedAt: c.startedAt,
              finishedAt: c.lastExit.at,
            },
          }
        : { waiting: c.waiting ?? { reason: 'ContainerCreating' } };
    return {
      name: c.spec.name,
      image: c.spec.image ?? '',
      imageID: '',
      ready: c.ready,
      started: c.proc !== undefined,
      restartCount: c.restarts,
      state,
    };
  }

  async #writeStatus(r: PodRun): Promise<void> {
    const ready = r.phase === 'Running' && r.mains.every((c) => c.ready);
    const cond = (type: string, ok: boolean, reason?: string) => ({
      type,
      status: ok ? 'True' : 'False',
      ...(reason && !ok ? { reason } : {}),
    });
    const terminal = r.phase === 'Succeeded' || r.phase === 'Failed';
    const status = {
      phase: r.phase,
      hostIP: '127.0.0.1',
      startTime: r.startTime,
      ...(r.message ? { message: r.message } : {}),
      conditions: [
        cond('PodScheduled', true),
        cond('Initialized', r.initDone, 'ContainersNotInitialized'),
        cond('ContainersReady', ready, terminal ? 'PodCompleted' : 'ContainersNotReady'),
        cond('Ready', ready, terminal ? 'PodCompleted' : 'ContainersNotReady'),
      ],
      initContainerStatuses: r.inits.map((c) => this.#containerStatus(c)),
      containerStatuses: r.mains.map((c) => this.#containerStatus(c)),
    };
    const text = JSON.stringify(status);
    if (text === r.lastStatus) return;
    const t = now();
    const withTimes = {
      ...status,
      conditions: status.conditions.map((c) => ({ ...c, lastTransitionTime: t })),
    };
    try {
      await this.#core.patchNamespacedPodStatus(
        { name: r.name, namespace: r.namespace, body: { status: withTimes } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      r.lastStatus = text;
    } catch (e) {
      if (statusCode(e) !== 404) throw e;
    }
  }

  /** Stops a pod's containers: SIGTERM, then SIGKILL to each process group after the grace period. */
  async #terminate(r: PodRun, graceSeconds: number, deleteObject: boolean): Promise<void> {
    r.terminating ??= (async () => {
      const running = [...r.inits, ...r.mains].filter((c) => c.proc);
      for (const c of running) c.proc?.kill('SIGTERM');
      const all = Promise.all(running.map((c) => c.exitP));
      const timedOut = await Promise.race([
        all.then(() => false),
        sleep(graceSeconds * 1000).then(() => true),
      ]);
      if (timedOut)
        for (const c of running) {
          const pid = c.proc?.pid;
          if (pid)
            try {
              process.kill(-pid, 'SIGKILL');
            } catch {
              // gone
            }
        }
      await all;
      this.#done.add(r.uid);
      this.#log(`pod ${r.namespace}/${r.name} stopped`);
    })();
    await r.terminating;
    this.#pods.delete(r.uid);
    rmSync(r.dir, { recursive: true, force: true });
    if (deleteObject) await this.#finalizeDelete(r.namespace, r.name, r.uid);
  }

  /** What a kubelet does last: deletes the pod object for good once its containers are gone. */
  async #finalizeDelete(namespace: string, name: string, uid: string): Promise<void> {
    try {
      await this.#core.deleteNamespacedPod({
        name,
        namespace,
        gracePeriodSeconds: 0,
        body: { gracePeriodSeconds: 0, preconditions: { uid } },
      });
    } catch (e) {
      const code = statusCode(e);
      if (code !== 404 && code !== 409) throw e;
    }
  }

  /** Stops every container (SIGTERM, short grace) and the loops; pod objects are left as they are. */
  async stop(opts: { keep?: boolean } = {}): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#heartbeat);
    this.#watch?.abort();
    await this.#loop?.catch(() => undefined);
    await Promise.all(
      [...this.#pods.values()].map((r) => this.#terminate(r, 5, false).catch(() => undefined)),
    );
    await Promise.all([...this.#chains.values()]);
    if (!opts.keep) rmSync(this.#o.root, { recursive: true, force: true });
  }
}
