import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { kubeBinary } from './bins.ts';
import { freePort, retryOnPortClash } from './ports.ts';
import { type ServerProcess, spawnServer, waitReady } from './proc.ts';
import { makeTempDir, removeDir } from './tmp.ts';

/**
 * A real control plane for operator tests, as controller-runtime's envtest runs one: etcd and
 * kube-apiserver (and optionally kube-controller-manager and kube-scheduler) on free loopback
 * ports, all state in one temp dir, removed by stop(). No kubelet: pods are never run unless a
 * test runs them itself.
 */
export interface KubeOptions {
  /** Run kube-controller-manager (garbage collection, Deployment → ReplicaSet → Pod, Jobs, service accounts, namespace deletion). */
  controllerManager?: boolean;
  /** Run kube-scheduler (binds pods to nodes; only useful with a test kubelet that registers a Node). */
  scheduler?: boolean;
  /** A control plane for real kubelets (test/cluster): see ControlPlaneForNodes. */
  nodes?: ControlPlaneForNodes;
  /** State under this directory, left in place by stop() (default: a temp dir that stop() removes). */
  dir?: string;
  /** The processes outlive this one (`make cluster-up`); stop them by pid. */
  detached?: boolean;
  /** Picks the apiserver's, controller manager's and scheduler's ports (default: freePort; tests of the harness lose one on purpose). */
  pickPort?: () => Promise<number>;
}

/**
 * What a control plane needs for real nodes: pods reach it at `advertiseAddress` (the `kubernetes`
 * Service's endpoint, so it listens on every address, the loopback included), its certificates come
 * from the cluster's CA (kubelets trust its client certificate), nodes and kube-proxy log in with
 * static tokens, and the persistent-volume controllers run.
 */
export interface ControlPlaneForNodes {
  advertiseAddress: string;
  serviceCidr: string;
  pki: {
    caCert: string;
    apiserverCert: string;
    apiserverKey: string;
    kubeletClientCert: string;
    kubeletClientKey: string;
  };
  tokens: { token: string; user: string; groups?: string[] }[];
  /** Seconds a pod stays bound to a NotReady or unreachable node before it is evicted (Kubernetes: 300). */
  podEvictionSeconds: number;
}

export interface KubeRunOptions {
  /** Written to kubectl's stdin (for `apply -f -`). */
  input?: string;
  /** Resolve with the output instead of throwing when kubectl exits non-zero. */
  allowFail?: boolean;
}

export interface KubeResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface KubeCluster {
  /** https://127.0.0.1:<port> */
  server: string;
  /** Bearer token of the admin user (`holt-admin`, group system:masters). */
  token: string;
  /** PEM bundle that verifies the apiserver's serving certificate. */
  caPath: string;
  kubeconfigPath: string;
  kubeconfig: KubeConfig;
  /** Runs kubectl against this cluster; resolves with stdout, throws with stderr on failure. */
  kubectl(args: string[], opts?: KubeRunOptions): Promise<string>;
  /** Like kubectl() but resolves with the exit code and both streams. */
  kubectlResult(args: string[], opts?: KubeRunOptions): Promise<KubeResult>;
  /** Runs helm against this cluster, with its own config/cache/data dirs in the temp dir. */
  helm(args: string[], opts?: KubeRunOptions): Promise<string>;
  dir: string;
  etcdUrl: string;
  procs: ServerProcess[];
  stop(): Promise<void>;
}

const ADMIN_USER = 'holt-admin';
// A /16 (65k ClusterIPs): a /24 holds only 254 Services, fewer than the operator bench's 100
// Holts create (4 ClusterIP Services each), and apply then fails with "range is full".
const SERVICE_CIDR = '10.0.0.0/16';
const ISSUER = 'https://kubernetes.default.svc.cluster.local';
const KCM_DISABLED = [
  'cloud-node-lifecycle-controller',
  'service-lb-controller',
  'node-route-controller',
  'node-ipam-controller',
  'persistentvolume-attach-detach-controller',
  'persistentvolume-binder-controller',
  'persistentvolume-expander-controller',
  'horizontal-pod-autoscaler-controller',
];

/** GET https://127.0.0.1:<port><path> with the token, trusting `ca`; resolves with status and body. */
function httpsGet(
  port: number,
  path: string,
  ca: string,
  token: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'GET',
        ca,
        headers: { authorization: `Bearer ${token}` },
        timeout: 2000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

function run(
  bin: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: KubeRunOptions = {},
): Promise<KubeResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      bin,
      args,
      { env, maxBuffer: 64 << 20, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        const result = { code, stdout: String(stdout), stderr: String(stderr) };
        if (code !== 0 && !opts.allowFail) {
          reject(
            new Error(`${bin.split('/').pop()} ${args.join(' ')} exited ${code}: ${result.stderr.trim()}`),
          );
        } else {
          resolve(result);
        }
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
    else child.stdin?.end();
  });
}

/** A kubeconfig for `user` with a bearer token (the admin, or a ServiceAccount token from `kubectl create token`). */
export function writeKubeconfig(
  path: string,
  server: string,
  caPath: string,
  user: string,
  token: string,
): void {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'holt-test',
        cluster: { server, 'certificate-authority-data': readFileSync(caPath).toString('base64') },
      },
    ],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'holt-test', context: { cluster: 'holt-test', user, namespace: 'default' } }],
    'current-context': 'holt-test',
    preferences: {},
  };
  writeFileSync(path, stringify(config), { mode: 0o600 });
}

/**
 * Starts a component on a port picked free, and again on a new one when it lost that port to another
 * process before it bound it (other tests start servers at the same time). Resolves with the port.
 */
async function startOnFreePort(
  pickPort: () => Promise<number>,
  procs: ServerProcess[],
  start: (port: number) => ServerProcess,
  ready: (port: number) => Promise<boolean>,
): Promise<number> {
  return retryOnPortClash(async () => {
    const port = await pickPort();
    const proc = start(port);
    procs.push(proc);
    try {
      await waitReady(proc, () => ready(port), 60_000, 100);
    } catch (e) {
      procs.splice(procs.indexOf(proc), 1);
      await proc.stop(1000);
      throw e;
    }
    return port;
  });
}

async function startEtcd(
  dir: string,
  spawn: typeof spawnServer,
): Promise<{ proc: ServerProcess; url: string }> {
  rmSync(join(dir, 'etcd'), { recursive: true, force: true }); // what a try that lost its port left
  const client = await freePort();
  const peer = await freePort();
  const url = `http://127.0.0.1:${client}`;
  const peerUrl = `http://127.0.0.1:${peer}`;
  const proc = spawn({
    name: 'etcd',
    command: kubeBinary('etcd'),
    args: [
      '--name=holt-test',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=holt-test=${peerUrl}`,
      '--initial-cluster-state=new',
      // Test data is throwaway: skip fsync (as envtest does).
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ],
    dir,
  });
  await waitReady(proc, async () => {
    const res = await fetch(`${url}/health`);
    return res.ok && ((await res.json()) as { health?: string }).health === 'true';
  });
  return { proc, url };
}

export type KubeTools = Pick<KubeCluster, 'kubectl' | 'kubectlResult' | 'helm'>;

/** kubectl and helm against `kubeconfigPath`, helm's config, cache and data under `home`. */
export function kubeTools(kubeconfigPath: string, home: string): KubeTools {
  const toolEnv: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: kubeconfigPath,
    HOME: home,
    HELM_CONFIG_HOME: join(home, 'helm', 'config'),
    HELM_CACHE_HOME: join(home, 'helm', 'cache'),
    HELM_DATA_HOME: join(home, 'helm', 'data'),
  };
  const kubectlResult = (args: string[], o?: KubeRunOptions) => run(kubeBinary('kubectl'), args, toolEnv, o);
  return {
    kubectlResult,
    async kubectl(args, o) {
      return (await kubectlResult(args, o)).stdout;
    },
    async helm(args, o) {
      return (await run(kubeBinary('helm'), args, toolEnv, o)).stdout;
    },
  };
}

export async function startKube(opts: KubeOptions = {}): Promise<KubeCluster> {
  const dir = opts.dir ?? makeTempDir('kube');
  mkdirSync(dir, { recursive: true });
  const nodes = opts.nodes;
  const spawn = (o: Parameters<typeof spawnServer>[0]) => spawnServer({ ...o, detached: opts.detached });
  const procs: ServerProcess[] = [];
  const pickPort = opts.pickPort ?? freePort;
  const stopAll = async (): Promise<void> => {
    // Dependents first, etcd last.
    for (const p of [...procs].reverse()) await p.stop(10_000);
    procs.length = 0;
  };
  try {
    const certDir = join(dir, 'certs');
    mkdirSync(certDir, { mode: 0o700 });

    // Service-account token signing keys.
    const { publicKey, privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      publicKeyEncoding: { type: 'spki', format: 'pem' },
      privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    });
    const saPub = join(certDir, 'sa.pub');
    const saKey = join(certDir, 'sa.key');
    writeFileSync(saPub, publicKey);
    writeFileSync(saKey, privateKey, { mode: 0o600 });

    // Static tokens: token,user,uid,"groups".
    const token = randomBytes(24).toString('hex');
    const kcmToken = randomBytes(24).toString('hex');
    const schedToken = randomBytes(24).toString('hex');
    const tokenFile = join(certDir, 'tokens.csv');
    writeFileSync(
      tokenFile,
      [
        `${token},${ADMIN_USER},holt-admin,"system:masters"`,
        // Bootstrap RBAC grants these users exactly what the components need.
        `${kcmToken},system:kube-controller-manager,system:kube-controller-manager`,
        `${schedToken},system:kube-scheduler,system:kube-scheduler`,
        ...(nodes?.tokens ?? []).map(
          (t) => `${t.token},${t.user},${t.user}${t.groups?.length ? `,"${t.groups.join(',')}"` : ''}`,
        ),
      ].join('\n') + '\n',
      { mode: 0o600 },
    );

    // A port picked free may be taken before etcd binds it (other tests start servers at once): new ports.
    const etcd = await retryOnPortClash(() => startEtcd(dir, spawn));
    procs.push(etcd.proc);

    // Without nodes the apiserver writes a self-signed CA + serving cert (SANs: 127.0.0.1, localhost,
    // kubernetes.default.svc, ...) to <cert-dir>/apiserver.crt; the file holds the serving cert followed by its CA.
    const caPath = nodes ? nodes.pki.caCert : join(certDir, 'apiserver.crt');
    const forNodes = nodes
      ? [
          '--bind-address=0.0.0.0',
          `--advertise-address=${nodes.advertiseAddress}`,
          `--tls-cert-file=${nodes.pki.apiserverCert}`,
          `--tls-private-key-file=${nodes.pki.apiserverKey}`,
          `--kubelet-client-certificate=${nodes.pki.kubeletClientCert}`,
          `--kubelet-client-key=${nodes.pki.kubeletClientKey}`,
          '--kubelet-preferred-address-types=InternalIP',
          `--default-not-ready-toleration-seconds=${nodes.podEvictionSeconds}`,
          `--default-unreachable-toleration-seconds=${nodes.podEvictionSeconds}`,
        ]
      : [
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          // The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints reject as loopback:
          // skip reconciling them instead of logging an error every 10 s.
          '--endpoint-reconciler-type=none',
        ];
    const serviceCidr = nodes?.serviceCidr ?? SERVICE_CIDR;
    const port = await startOnFreePort(
      pickPort,
      procs,
      (port) =>
        spawn({
          name: 'kube-apiserver',
          command: kubeBinary('kube-apiserver'),
          args: [
            `--etcd-servers=${etcd.url}`,
            `--cert-dir=${certDir}`,
            `--secure-port=${port}`,
            ...forNodes,
            `--token-auth-file=${tokenFile}`,
            '--authorization-mode=Node,RBAC',
            `--service-account-key-file=${saPub}`,
            `--service-account-signing-key-file=${saKey}`,
            `--service-account-issuer=${ISSUER}`,
            `--service-cluster-ip-range=${serviceCidr}`,
            '--allow-privileged=true',
            // Without a controller manager nothing creates the `default` ServiceAccount, so the
            // ServiceAccount admission plugin would reject every pod (envtest disables it too).
            ...(opts.controllerManager ? [] : ['--disable-admission-plugins=ServiceAccount']),
            '--profiling=false',
            '--v=1',
          ],
          dir,
        }),
      async (port) => {
        if (!existsSync(caPath)) return false;
        const res = await httpsGet(port, '/readyz', readFileSync(caPath, 'utf8'), token);
        return res.status === 200;
      },
    );
    const server = `https://127.0.0.1:${port}`;

    const kubeconfigPath = join(dir, 'kubeconfig');
    writeKubeconfig(kubeconfigPath, server, caPath, ADMIN_USER, token);
    const kubeconfig = new KubeConfig();
    kubeconfig.loadFromFile(kubeconfigPath);

    if (opts.controllerManager) {
      const kcmConfig = join(dir, 'kube-controller-manager.kubeconfig');
      writeKubeconfig(kcmConfig, server, caPath, 'system:kube-controller-manager', kcmToken);
      // With real nodes, volumes are bound (the provisioner's PVs), attached and expanded too.
      const disabled = nodes ? KCM_DISABLED.filter((c) => !c.startsWith('persistentvolume-')) : KCM_DISABLED;
      await startOnFreePort(
        pickPort,
        procs,
        (kcmPort) =>
          spawn({
            name: 'kube-controller-manager',
            command: kubeBinary('kube-controller-manager'),
            args: [
              `--kubeconfig=${kcmConfig}`,
              // Its own HTTPS endpoint only serves /healthz (always allowed) to the harness: no delegated
              // authn/authz, which would look for a client-CA ConfigMap this apiserver does not publish.
              '--bind-address=127.0.0.1',
              `--secure-port=${kcmPort}`,
              `--cert-dir=${join(dir, 'kcm-certs')}`,
              '--leader-elect=false',
              // Each controller gets its own service account and token, as in a real cluster.
              '--use-service-account-credentials=true',
              `--service-account-private-key-file=${saKey}`,
              `--root-ca-file=${caPath}`,
              `--service-cluster-ip-range=${serviceCidr}`,
              // Everything on by default except what needs a cloud, volumes, node CIDRs or metrics.
              `--controllers=*,${disabled.map((c) => `-${c}`).join(',')}`,
              // A stopped node is NotReady after 20 s instead of 50 s (the multi-node tests stop one).
              ...(nodes ? ['--node-monitor-grace-period=20s'] : []),
              '--v=1',
            ],
            dir,
          }),
        async (kcmPort) => {
          const ca = join(dir, 'kcm-certs', 'kube-controller-manager.crt');
          if (!existsSync(ca)) return false;
          return (await httpsGet(kcmPort, '/healthz', readFileSync(ca, 'utf8'), token)).status === 200;
        },
      );
    }

    if (opts.scheduler) {
      const schedConfig = join(dir, 'kube-scheduler.kubeconfig');
      writeKubeconfig(schedConfig, server, caPath, 'system:kube-scheduler', schedToken);
      await startOnFreePort(
        pickPort,
        procs,
        (schedPort) =>
          spawn({
            name: 'kube-scheduler',
            command: kubeBinary('kube-scheduler'),
            args: [
              `--kubeconfig=${schedConfig}`,
              '--bind-address=127.0.0.1',
              `--secure-port=${schedPort}`,
              `--cert-dir=${join(dir, 'scheduler-certs')}`,
              '--leader-elect=false',
              '--v=1',
            ],
            dir,
          }),
        async (schedPort) => {
          const ca = join(dir, 'scheduler-certs', 'kube-scheduler.crt');
          if (!existsSync(ca)) return false;
          return (await httpsGet(schedPort, '/healthz', readFileSync(ca, 'utf8'), token)).status === 200;
        },
      );
    }

    return {
      server,
      token,
      caPath,
      kubeconfigPath,
      kubeconfig,
      ...kubeTools(kubeconfigPath, dir),
      dir,
      etcdUrl: etcd.url,
      procs,
      async stop() {
        await stopAll();
        if (!opts.dir) removeDir(dir);
      },
    };
  } catch (err) {
    await stopAll();
    if (!opts.dir) removeDir(dir);
    throw err;
  }
}
