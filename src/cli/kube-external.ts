import type { Server } from 'node:net';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { CliError, EXIT } from './output.ts';

/**
 * An external store that runs in the cluster (a StatefulSet or CloudNativePG's `-rw` Service in
 * another namespace) is named by its Service's DNS name, which resolves only inside the cluster: the
 * CLI reaches it as it reaches a bundled one, through a port-forward to a ready pod behind that
 * Service. A store outside the cluster (any other host) is used at its own URL.
 */
export interface ClusterService {
  service: string;
  namespace: string;
  port: number;
}

const label = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const SVC_HOST = new RegExp(`^(${label})\\.(${label})\\.svc(\\.cluster\\.local)?\\.?$`);

/** The Service a store URL names, when its host is `<service>.<namespace>.svc[.cluster.local]`. */
export function clusterService(url: string, defaultPort: number): ClusterService | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const m = SVC_HOST.exec(u.hostname.toLowerCase());
  if (!m) return undefined;
  return { service: m[1]!, namespace: m[3]!, port: u.port ? Number(u.port) : defaultPort };
}

type Forward = (
  kc: KubeConfig,
  namespace: string,
  pod: string,
  port: number,
) => Promise<{ port: number; server: Server }>;

/** The URL with its host and port replaced by the loopback forward's. */
export function viaLoopback(url: string, port: number): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

/**
 * Opens the way to a store URL: unchanged for a host outside the cluster; for an in-cluster Service,
 * a loopback port-forward to a ready pod behind it (the Service's port mapped to the pod's), the URL
 * rewritten to it, and the Service's name kept for a TLS certificate check.
 */
export async function reachStore(
  kc: KubeConfig,
  url: string,
  defaultPort: number,
  forward: Forward,
  isReady: (p: V1Pod) => boolean,
): Promise<{ url: string; servername?: string; close(): Promise<void> }> {
  const svc = clusterService(url, defaultPort);
  if (!svc) return { url, close: async () => {} };
  const what = `Service ${svc.namespace}/${svc.service}`;
  const core = kc.makeApiClient(CoreV1Api);
  const fail = (why: string) =>
    new CliError(
      `${what} (the Holt's external store): ${why}; the CLI reaches an in-cluster store through a port-forward, which needs get on services and pods and create on pods/portforward in ${svc.namespace}`,
      EXIT.error,
    );
  let spec: Awaited<ReturnType<CoreV1Api['readNamespacedService']>>['spec'];
  let pods: V1Pod[];
  try {
    spec = (await core.readNamespacedService({ namespace: svc.namespace, name: svc.service })).spec;
    const labelSelector = Object.entries(spec?.selector ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    if (!labelSelector) throw fail('it selects no pods');
    pods = (await core.listNamespacedPod({ namespace: svc.namespace, labelSelector })).items;
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw fail(`cannot read it (${(e as Error).message.split('\n')[0]})`);
  }
  const pod = pods.find(isReady);
  if (!pod?.metadata?.name) throw fail('no ready pod behind it');
  const target = spec?.ports?.find((p) => p.port === svc.port)?.targetPort ?? svc.port;
  const podPort =
    typeof target === 'number'
      ? target
      : /^\d+$/.test(target)
        ? Number(target)
        : pod.spec?.containers.flatMap((c) => c.ports ?? []).find((p) => p.name === target)?.containerPort;
  if (!podPort) throw fail(`its port ${svc.port} names no port of pod ${pod.metadata.name}`);
  const fwd = await forward(kc, svc.namespace, pod.metadata.name, podPort);
  return {
    url: viaLoopback(url, fwd.port),
    servername: new URL(url).hostname,
    close: () => new Promise<void>((resolve) => fwd.server.close(() => resolve())),
  };
}
