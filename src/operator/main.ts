import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { collectDefaultMetrics } from 'prom-client';
import { z } from 'zod';
import { reportWorkerExit } from '../blackboard/worker-exits.ts';
import { isCidr } from '../common/cidr.ts';
import { ConfigError, configErrorExit, formatIssues } from '../common/config.ts';
import { startProbeServer } from '../common/http.ts';
import { createLogger, type Logger } from '../common/logger.ts';
import { parseProgram } from '../common/program.ts';
import { type TracingSettings, tracingSettings } from '../telemetry/settings.ts';
import { startTracing } from '../telemetry/tracing.ts';
import { PostgresBacklogReader } from './autoscale/backlog.ts';
import { NatsWakeups } from './autoscale/wakeup.ts';
import { RedisFiguresReader } from './controllers/agentfigures.ts';
import { HoltBoards, RedisRegistryWriter } from './controllers/registry.ts';
import type { StoreEndpoint } from './kube/endpoint.ts';
import { KubeClient } from './kube/kube.ts';
import { LeaderElector } from './kube/leader.ts';
import { DEFAULT_RUNTIME_IMAGE, Operator, type OperatorOptions } from './operator.ts';
import { OPERATOR_PROGRAM } from './program.ts';
import { DEFAULT_CLUSTER_CIDRS } from './specs/networkpolicy.ts';
import { externalRoleUrl, pgUriKey, type StoreKind, storeSecretName, urlKey } from './specs/stores.ts';

const bool = z.preprocess(
  (v) => (typeof v === 'string' ? !['false', '0', 'no', ''].includes(v.toLowerCase()) : v),
  z.boolean(),
);
const Config = z.object({
  namespaces: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  leaderElect: bool.default(true),
  /** Where the operator runs: the stores admit it from this namespace only. */
  operatorNamespace: z.string().min(1).default('default'),
  /** The cluster's pod and service CIDRs, never reachable through an agent's egress. */
  clusterCidrs: z
    .string()
    .default(DEFAULT_CLUSTER_CIDRS.join(','))
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().refine(isCidr, 'each must be a CIDR')).min(1, 'must name at least one CIDR')),
  leaseName: z.string().default('holt-operator'),
  leaseNamespace: z.string().default('default'),
  healthPort: z.coerce.number().int().min(0).max(65535).default(8081),
  metricsPort: z.coerce.number().int().min(0).max(65535).default(8080),
  runtimeImage: z.string().min(1).default(DEFAULT_RUNTIME_IMAGE),
  identity: z.string().min(1).default(hostname()),
  /** How often each Agent's claims in flight and budget use are re-read from its Holt's Redis. */
  statusPollMs: z.coerce.number().int().min(500).default(10_000),
  kubeconfig: z.string().optional(),
});

/** The settings, from the environment `parseProgram` returns (flags already merged in). */
function readConfig(env: NodeJS.ProcessEnv): z.infer<typeof Config> {
  const raw: Record<string, string | undefined> = {
    namespaces: env.HOLT_OPERATOR_NAMESPACES,
    leaderElect: env.HOLT_OPERATOR_LEADER_ELECT,
    operatorNamespace: env.POD_NAMESPACE,
    clusterCidrs: env.HOLT_OPERATOR_CLUSTER_CIDRS,
    leaseName: env.HOLT_OPERATOR_LEASE_NAME,
    leaseNamespace: env.HOLT_OPERATOR_LEASE_NAMESPACE ?? env.POD_NAMESPACE,
    healthPort: env.HOLT_OPERATOR_HEALTH_PORT,
    metricsPort: env.HOLT_OPERATOR_METRICS_PORT,
    runtimeImage: env.HOLT_RUNTIME_IMAGE,
    identity: env.POD_NAME,
    statusPollMs: env.HOLT_OPERATOR_STATUS_POLL_MS,
    kubeconfig: env.KUBECONFIG,
  };
  const r = Config.safeParse(Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined)));
  if (!r.success) throw new ConfigError(formatIssues(r.error));
  return r.data;
}

/** What `buildOperator` needs of the configuration. */
export type OperatorWiring = Pick<
  z.infer<typeof Config>,
  'namespaces' | 'runtimeImage' | 'identity' | 'statusPollMs'
> &
  Partial<Pick<z.infer<typeof Config>, 'operatorNamespace' | 'clusterCidrs'>>;

/**
 * The production wiring of the operator (used by `main` and by tests): store URLs come from each
 * Holt's generated Secrets (bundled) or its spec (external). One Postgres reader per operator serves
 * both the autoscaler's backlog and the fresh_per_call claim Jobs. `overrides` is for tests only.
 */
export function buildOperator(
  client: KubeClient,
  log: Logger,
  cfg: OperatorWiring,
  overrides: Partial<OperatorOptions> = {},
): Operator {
  // Secrets are read when needed (never logged): the bundled store's generated one by key.
  const secretValue = async (ns: string, name: string, key: string) => {
    const s = await client.get('Secret', ns, name);
    const v = (s?.data as Record<string, string> | undefined)?.[key];
    if (!v) throw new Error(`secret ${ns}/${name} has no key ${key}`);
    return Buffer.from(v, 'base64').toString('utf8');
  };
  const storeUrl =
    (store: StoreKind, key: string) =>
    async (h: { namespace: string; name?: string; holt?: string }): Promise<StoreEndpoint> => {
      const holt = h.name ?? h.holt ?? '';
      const obj = op.cache.get('Holt', h.namespace, holt);
      const spec = (obj?.spec ?? {}) as {
        stores?: Record<
          string,
          {
            mode?: string;
            url?: string;
            urlSecretRef?: { name: string; key: string };
            secretName?: string;
            users?: { operator?: { urlSecretRef?: { name: string; key: string }; secretName?: string } };
          }
        > & { tls?: { secretName?: string } };
      };
      const s = spec.stores?.[store];
      if (s?.mode === 'external') {
        // The operator's own user where the Holt names one (docs/security.md § External stores).
        const own = s.users?.operator;
        if (own?.urlSecretRef) return secretValue(h.namespace, own.urlSecretRef.name, own.urlSecretRef.key);
        if (own?.secretName && s.secretName) {
          const app = (k: string) => secretValue(h.namespace, s.secretName ?? '', k);
          const role = (k: string) => secretValue(h.namespace, own.secretName ?? '', k);
          const [username, password, host, port, dbname] = await Promise.all([
            role('username'),
            role('password'),
            app('host'),
            app('port'),
            app('dbname'),
          ]);
          return externalRoleUrl({ username, password }, { host, port, dbname });
        }
        if (s.url) return s.url;
        if (s.urlSecretRef) return secretValue(h.namespace, s.urlSecretRef.name, s.urlSecretRef.key);
        if (s.secretName) return secretValue(h.namespace, s.secretName, 'uri');
      }
      const url = await secretValue(h.namespace, storeSecretName(holt, store), key);
      const tls = spec.stores?.tls?.secretName;
      if (!tls) return url;
      // The bundled stores serve TLS: Redis by its scheme; NATS and Postgres upgrade with the CA given.
      const ca = await secretValue(h.namespace, tls, 'ca.crt');
      return { url: store === 'redis' ? url.replace(/^redis:/, 'rediss:') : url, ca };
    };
  // One connection per Holt's Redis, shared by the registry writer and the Agent status reader.
  const boards = new HoltBoards(storeUrl('redis', urlKey('operator')));
  // One reader (one small pool per Holt) for the autoscaler's backlog and the claim Jobs.
  const inbox = new PostgresBacklogReader(storeUrl('postgres', pgUriKey('operator')));
  const op: Operator = new Operator({
    client,
    log,
    namespaces: cfg.namespaces,
    runtimeImage: cfg.runtimeImage,
    identity: cfg.identity,
    registry: new RedisRegistryWriter(boards),
    runtime: new RedisFiguresReader(boards, { log }),
    statusPollMs: cfg.statusPollMs,
    network: { operatorNamespace: cfg.operatorNamespace, clusterCidrs: cfg.clusterCidrs },
    backlog: inbox,
    claims: inbox,
    wakeups: new NatsWakeups(storeUrl('nats', urlKey('operator'))),
    reportWorkerExit: async (holt, e) => {
      const bb = await boards.board(holt);
      await reportWorkerExit(bb.redis, bb.k.workerExits, e);
    },
    ...overrides,
  });
  return op;
}

/**
 * `holt operator`: informers on every replica, reconcilers and the autoscaler on the leader only.
 * Store URLs come from each Holt's generated Secrets (bundled) or the spec (external URL).
 */
export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const cli = parseProgram(OPERATOR_PROGRAM, argv, env);
  if (!cli.run) return cli.exitCode;
  let cfg: ReturnType<typeof readConfig>;
  let traceSettings: TracingSettings;
  try {
    cfg = readConfig(cli.env);
    traceSettings = tracingSettings(cli.env);
  } catch (e) {
    return configErrorExit(e, 'holt operator: invalid configuration');
  }
  const log = createLogger('operator', { identity: cfg.identity });
  const tracing = startTracing('operator', traceSettings, log);
  const kc = new KubeConfig();
  if (cfg.kubeconfig) kc.loadFromFile(cfg.kubeconfig);
  else kc.loadFromDefault();
  const client = new KubeClient(kc);
  const op = buildOperator(client, log, cfg);
  // Process and Node metrics (CPU, memory, event loop lag, GC) beside ours, on the same /metrics.
  collectDefaultMetrics({ register: op.metrics.registry });
  const elector = cfg.leaderElect
    ? new LeaderElector(
        client,
        { namespace: cfg.leaseNamespace, name: cfg.leaseName, identity: cfg.identity },
        log,
      )
    : undefined;
  const probes = await startProbeServer({
    port: cfg.healthPort,
    healthz: async () => ({ ok: true }),
    // Ready once the caches are filled (a standby is ready too: it serves a warm cache).
    readyz: async () =>
      op.cache.synced
        ? { ok: true, details: { leader: op.leading } }
        : { ok: false, reason: 'informers not synced' },
    ...(cfg.metricsPort === cfg.healthPort ? { registry: op.metrics.registry } : {}),
  });
  const metrics =
    cfg.metricsPort !== cfg.healthPort
      ? await startProbeServer({
          port: cfg.metricsPort,
          healthz: async () => ({ ok: true }),
          registry: op.metrics.registry,
        })
      : undefined;
  let exitCode = 0;
  const done = new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await op.startInformers();
  log.info(
    { event_type: 'operator_started', namespaces: cfg.namespaces, leader_election: cfg.leaderElect },
    'operator started',
  );
  if (elector) {
    void elector.run(
      () => op.startControllers(),
      () => {
        // Lost the lease: stop reconciling at once and exit, so a restart rejoins as a standby.
        log.error({ event_type: 'leader_lost' }, 'leadership lost; exiting');
        exitCode = 1;
        process.emit('SIGTERM');
      },
    );
  } else {
    op.startControllers();
  }
  await done;
  await elector?.stop();
  await op.stop();
  client.close();
  await probes.close();
  await metrics?.close();
  await tracing.shutdown();
  return exitCode;
}
