import { createServer, type Server } from 'node:net';
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  Log,
  PortForward,
  type V1Pod,
} from '@kubernetes/client-node';
import type { RedisOptions } from 'ioredis';
import { z } from 'zod';
import { API_VERSION } from '../api/common.ts';
import { reachStore } from './kube-external.ts';
import { CliError, EXIT } from './output.ts';

/**
 * `holt --kube NAMESPACE/NAME`: the commands reach a Holt in a cluster through the API server, as
 * kubectl does, with the user's own rights: the kubeconfig and context kubectl would use; the Holt's
 * Redis (blackboard commands) or Postgres (work, life) behind a port-forward on the loopback (pod IPs
 * are never assumed reachable), its password from the Secret the operator generated. An external Redis is used at its own URL, through a
 * port-forward too when that URL names a Service of the cluster (kube-external.ts).
 */
export interface KubeRef {
  namespace?: string;
  name: string;
}

const dns1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** `ns/name` or `name` (the context's namespace). */
export function parseKubeRef(value: string): KubeRef {
  const parts = value.split('/');
  const [namespace, name] = parts.length === 2 ? parts : [undefined, parts[0]];
  if (
    parts.length > 2 ||
    !name ||
    !dns1123.test(name) ||
    (namespace !== undefined && !dns1123.test(namespace))
  )
    throw new CliError(`--kube: "${value}" is not NAMESPACE/NAME or NAME (lower-case DNS names)`, EXIT.usage);
  return { namespace, name };
}

/** The kubeconfig as kubectl reads it ($KUBECONFIG, else ~/.kube/config), at `context` if given. */
export function loadKubeConfig(context?: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromDefault();
  } catch (e) {
    throw new CliError(`cannot read the kubeconfig: ${(e as Error).message}`, EXIT.error);
  }
  if (context) {
    if (!kc.getContexts().some((c) => c.name === context))
      throw new CliError(
        `--context: no context "${context}" in the kubeconfig (known: ${
          kc
            .getContexts()
            .map((c) => c.name)
            .join(', ') || 'none'
        })`,
        EXIT.usage,
      );
    kc.setCurrentContext(context);
  }
  if (!kc.getCurrentCluster())
    throw new CliError('no cluster in the kubeconfig: set KUBECONFIG or pass --context', EXIT.usage);
  return kc;
}

const HoltStores = z.object({
  spec: z.object({
    stores: z
      .object({
        redis: z
          .object({
            mode: z.enum(['bundled', 'external']).default('bundled'),
            url: z.string().optional(),
            urlSecretRef: z.object({ name: z.string(), key: z.string() }).optional(),
          })
          .default({ mode: 'bundled' }),
        postgres: z
          .object({
            mode: z.enum(['bundled', 'external']).default('bundled'),
            url: z.string().optional(),
            secretName: z.string().optional(),
          })
          .default({ mode: 'bundled' }),
        tls: z.object({ secretName: z.string() }).optional(),
      })
      .default({ redis: { mode: 'bundled' }, postgres: { mode: 'bundled' } }),
  }),
  status: z
    .object({ phase: z.string().optional(), observedGeneration: z.number().optional() })
    .passthrough()
    .optional(),
});

/** What an API error means to the user: not found, forbidden (which verb on what), unreachable. */
export function apiError(e: unknown, what: string): CliError {
  if (e instanceof ApiException) {
    if (e.code === 404) return new CliError(`${what} not found`, EXIT.notFound);
    if (e.code === 401)
      return new CliError(`the API server refused the credentials while reading ${what}`, EXIT.error);
    if (e.code === 403) {
      const msg = (() => {
        try {
          return (JSON.parse(String(e.body)) as { message?: string }).message;
        } catch {
          return undefined;
        }
      })();
      return new CliError(`forbidden: ${msg ?? `cannot read ${what}`}`, EXIT.error);
    }
    return new CliError(`the API server answered ${e.code} while reading ${what}`, EXIT.error);
  }
  return new CliError(
    `cannot reach the API server while reading ${what}: ${(e as Error).message}`,
    EXIT.error,
  );
}

const isReady = (p: V1Pod) =>
  !p.metadata?.deletionTimestamp &&
  (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');

/** A local listener whose connections are port-forwarded to `port` of `pod`, one stream each. */
export async function forward(
  kc: KubeConfig,
  namespace: string,
  pod: string,
  port: number,
): Promise<{ port: number; server: Server }> {
  const pf = new PortForward(kc, true);
  const server = createServer((socket) => {
    socket.on('error', () => socket.destroy());
    const errors = new PassThrough();
    errors.on('data', () => socket.destroy());
    pf.portForward(namespace, pod, [port], socket, errors, socket).catch(() => socket.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('no local port');
  return { port: addr.port, server };
}

/** A Holt in a cluster as the API server shows it to this user: no store opened yet. */
export interface KubeRefHolt {
  namespace: string;
  name: string;
  kc: KubeConfig;
  stores: z.infer<typeof HoltStores>['spec']['stores'];
  /** The Holt has never been reconciled (no operator watches its namespace?). */
  unreconciled: boolean;
  /** A key of a Secret in the Holt's namespace, read with the user's own rights. */
  secretValue(secret: string, key: string): Promise<string>;
}

export interface KubeHolt extends KubeRefHolt {
  /** A Redis URL this process can use (a loopback port-forward for a bundled Redis). */
  redisUrl: string;
  /** TLS to a bundled Redis that serves it: its CA, and the name its certificate gives it. */
  redisOptions?: RedisOptions;
  close(): Promise<void>;
}

/** Reads the Holt through the API server (the commands that need no store: logs, send, token). */
export async function readKubeHolt(ref: KubeRef, context?: string): Promise<KubeRefHolt> {
  const kc = loadKubeConfig(context);
  const namespace = ref.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
  const what = `Holt ${namespace}/${ref.name}`;
  const [group, version] = API_VERSION.split('/') as [string, string];
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  let raw: unknown;
  try {
    raw = await custom.getNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'holts',
      name: ref.name,
    });
  } catch (e) {
    throw apiError(e, what);
  }
  const holt = HoltStores.safeParse(raw);
  if (!holt.success)
    throw new CliError(`${what} is not a Holt this CLI understands: ${holt.error.message}`, EXIT.error);
  const secretValue = async (secret: string, key: string): Promise<string> => {
    let s: Awaited<ReturnType<CoreV1Api['readNamespacedSecret']>>;
    try {
      s = await core.readNamespacedSecret({ namespace, name: secret });
    } catch (e) {
      throw apiError(e, `Secret ${namespace}/${secret}`);
    }
    const v = s.data?.[key];
    if (v === undefined) throw new CliError(`Secret ${namespace}/${secret} has no key ${key}`, EXIT.error);
    return Buffer.from(v, 'base64').toString('utf8');
  };
  return {
    namespace,
    name: ref.name,
    kc,
    stores: holt.data.spec.stores,
    unreconciled: !holt.data.status?.observedGeneration,
    secretValue,
  };
}

/**
 * A ready pod behind a bundled store's Service (`<holt>-<store>`), port-forwarded on the loopback. A
 * Holt no operator has reconciled has no Service: the error says who watches what.
 */
async function forwardToStore(
  h: KubeRefHolt,
  store: 'redis' | 'postgres',
  port: number,
): Promise<{ port: number; server: Server }> {
  const core = h.kc.makeApiClient(CoreV1Api);
  const service = `${h.name}-${store}`;
  let selector: Record<string, string> | undefined;
  try {
    selector = (await core.readNamespacedService({ namespace: h.namespace, name: service })).spec?.selector;
  } catch (e) {
    if (apiError(e, '').code === EXIT.notFound && h.unreconciled) {
      const { findOperators, noStatusHint } = await import('./unwatched.ts');
      throw new CliError(noStatusHint(h.namespace, h.name, await findOperators(h.kc)), EXIT.error);
    }
    throw apiError(e, `Service ${h.namespace}/${service}`);
  }
  let pods: V1Pod[];
  try {
    const labelSelector = Object.entries(selector ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    pods = (await core.listNamespacedPod({ namespace: h.namespace, labelSelector })).items;
  } catch (e) {
    throw apiError(e, `the pods of Service ${h.namespace}/${service}`);
  }
  const pod = pods.find(isReady);
  if (!pod?.metadata?.name)
    throw new CliError(
      `the ${store === 'redis' ? 'Redis' : 'Postgres'} of Holt ${h.namespace}/${h.name} is not ready yet (${pods.length ? pods.map((p) => `${p.metadata?.name}: ${p.status?.phase}`).join(', ') : 'no pod'}): see \`kubectl get holt ${h.name} -n ${h.namespace}\``,
      EXIT.error,
    );
  return forward(h.kc, h.namespace, pod.metadata.name, port);
}

const closer = (fwd: { server: Server }) => () =>
  new Promise<void>((resolve) => fwd.server.close(() => resolve()));

/** Reads the Holt, its Redis credentials, and opens the way to its Redis. */
export async function openKubeHolt(ref: KubeRef, context?: string): Promise<KubeHolt> {
  const h = await readKubeHolt(ref, context);
  const redis = h.stores.redis;
  if (redis.mode === 'external') {
    const url = redis.urlSecretRef
      ? await h.secretValue(redis.urlSecretRef.name, redis.urlSecretRef.key)
      : redis.url;
    if (!url) throw new CliError(`Holt ${h.namespace}/${h.name}: its external Redis has no url`, EXIT.error);
    // An in-cluster one (another namespace's Service) through a port-forward, as a bundled one.
    const way = await reachStore(h.kc, url, 6379, forward, isReady);
    const tls = way.servername && url.startsWith('rediss:');
    return {
      ...h,
      redisUrl: way.url,
      ...(tls ? { redisOptions: { tls: { servername: way.servername } } } : {}),
      close: way.close,
    };
  }
  // Bundled: the operator's StatefulSet pod behind the `<holt>-redis` Service, the password in `<holt>-redis`.
  const fwd = await forwardToStore(h, 'redis', 6379);
  try {
    const password = await h.secretValue(`${h.name}-redis`, 'password');
    const ca = h.stores.tls ? await h.secretValue(h.stores.tls.secretName, 'ca.crt') : undefined;
    return {
      ...h,
      // As Redis's `admin` user (src/access/redis.ts): its `default` user, a URL with no name, is off.
      redisUrl: `${ca ? 'rediss' : 'redis'}://admin:${encodeURIComponent(password)}@127.0.0.1:${fwd.port}`,
      // Through the loopback forward: the certificate is checked against the Service's name.
      ...(ca ? { redisOptions: { tls: { ca, servername: `${h.name}-redis` } } } : {}),
      close: closer(fwd),
    };
  } catch (e) {
    await closer(fwd)();
    throw e;
  }
}

/** The way to a Holt's Postgres (work items, living agents): a URL, TLS options, and how to close it. */
export interface KubePostgres {
  url: string;
  ssl?: { ca: string; servername: string };
  close(): Promise<void>;
}

/**
 * A Holt's Postgres as its CLI user: a bundled one behind a port-forward, as the superuser of its
 * CloudNativePG-style `<holt>-postgres-app` Secret (key `password`, user `holt`, database `holt`); an
 * external one at the `uri` of its Secret, or its url.
 */
export async function openKubePostgres(h: KubeRefHolt): Promise<KubePostgres> {
  const pg = h.stores.postgres;
  if (pg.mode === 'external') {
    const url = pg.secretName ? await h.secretValue(pg.secretName, 'uri') : pg.url;
    if (!url)
      throw new CliError(`Holt ${h.namespace}/${h.name}: its external Postgres has no url`, EXIT.error);
    const way = await reachStore(h.kc, url, 5432, forward, isReady);
    return { url: way.url, close: way.close };
  }
  const fwd = await forwardToStore(h, 'postgres', 5432);
  try {
    const secret = `${h.name}-postgres-app`;
    const [user, password, db] = await Promise.all([
      h.secretValue(secret, 'username'),
      h.secretValue(secret, 'password'),
      h.secretValue(secret, 'dbname'),
    ]);
    const ca = h.stores.tls ? await h.secretValue(h.stores.tls.secretName, 'ca.crt') : undefined;
    return {
      url: `postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${fwd.port}/${encodeURIComponent(db)}`,
      ...(ca ? { ssl: { ca, servername: `${h.name}-postgres` } } : {}),
      close: closer(fwd),
    };
  } catch (e) {
    await closer(fwd)();
    throw e;
  }
}

/** The pods of a Holt's component: an agent's role, or `orchestrator`. */
export async function componentPods(
  kc: KubeConfig,
  namespace: string,
  holt: string,
  component: string,
): Promise<V1Pod[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const labelSelector =
    component === 'orchestrator'
      ? `holt.io/instance=${holt},app.kubernetes.io/component=orchestrator`
      : `holt.io/instance=${holt},holt.io/role=${component}`;
  try {
    return (await core.listNamespacedPod({ namespace, labelSelector })).items;
  } catch (e) {
    throw apiError(e, `the pods of ${namespace}/${holt}`);
  }
}

/** Prints a pod's log (following it with `follow`, until it ends or Ctrl-C) through the API server. */
export async function podLog(
  kc: KubeConfig,
  namespace: string,
  pod: string,
  container: string,
  opts: { follow: boolean; tailLines: number },
): Promise<void> {
  const sink = new PassThrough();
  sink.pipe(process.stdout, { end: false });
  let abort: AbortController;
  try {
    abort = await new Log(kc).log(namespace, pod, container, sink, {
      follow: opts.follow,
      tailLines: opts.tailLines,
    });
  } catch (e) {
    throw apiError(e, `the log of pod ${namespace}/${pod}`);
  }
  const interrupted = new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
  await Promise.race([finished(sink).catch(() => undefined), interrupted]);
  abort.abort();
}
