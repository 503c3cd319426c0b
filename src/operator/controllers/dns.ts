import type { HoltSpec } from '../../api/holt.ts';
import type { Cache } from '../kube/cache.ts';
import type { KubeClient } from '../kube/kube.ts';
import { collectorService } from '../specs/networkpolicy.ts';
import type { StoreAddresses } from '../specs/pup.ts';
import { STORES, type StoreKind, storeName } from '../specs/stores.ts';
import type { ControllerContext } from './context.ts';

/**
 * A Holt's bundled stores' Service addresses, from the cache, for the /etc/hosts of agent pods that
 * go without DNS. A Service not cached yet is left out: its arrival requeues the Holt, which requeues
 * its Agents and pools, and their pods are rewritten with it.
 */
export function storeAddresses(cache: Cache, namespace: string, holt: string): StoreAddresses {
  const clusterIps: Partial<Record<StoreKind, string>> = {};
  for (const s of STORES) {
    const ip = (
      cache.get('Service', namespace, storeName(holt, s))?.spec as { clusterIP?: string } | undefined
    )?.clusterIP;
    if (ip) clusterIps[s] = ip;
  }
  return { namespace, clusterIps };
}

/**
 * What a pod without DNS finds in /etc/hosts: its Holt's stores, and the trace collector's Service
 * when `spec.tracing.endpoint` names one (`name.ns.svc`), so that a sealed agent's spans are exported
 * too. The collector's Service is not the operator's (no informer): it is read by name, at most every
 * half minute; one that cannot be read is left out, and a later resync puts it in.
 */
export async function podAddresses(
  ctx: Pick<ControllerContext, 'cache' | 'client' | 'log'>,
  namespace: string,
  holt: string,
  tracing: HoltSpec['tracing'],
): Promise<StoreAddresses> {
  const stores = storeAddresses(ctx.cache, namespace, holt);
  const collector = await collectorAddress(ctx, tracing.endpoint);
  return collector ? { ...stores, collector } : stores;
}

const COLLECTOR_TTL_MS = 30_000;
const collectorIps = new WeakMap<KubeClient, Map<string, { ip: string | undefined; atMs: number }>>();

async function collectorAddress(
  ctx: Pick<ControllerContext, 'client' | 'log'>,
  endpoint: string | undefined,
): Promise<{ host: string; ip: string } | undefined> {
  const svc = collectorService(endpoint);
  if (!svc) return undefined;
  const memo = collectorIps.get(ctx.client) ?? new Map();
  collectorIps.set(ctx.client, memo);
  const key = `${svc.namespace}/${svc.name}`;
  let hit = memo.get(key);
  if (!hit || Date.now() - hit.atMs >= COLLECTOR_TTL_MS) {
    hit = { ip: await readClusterIp(ctx, svc.namespace, svc.name), atMs: Date.now() };
    memo.set(key, hit);
  }
  return hit.ip ? { host: svc.host, ip: hit.ip } : undefined;
}

async function readClusterIp(
  ctx: Pick<ControllerContext, 'client' | 'log'>,
  namespace: string,
  name: string,
): Promise<string | undefined> {
  try {
    const s = await ctx.client.get('Service', namespace, name);
    const ip = (s?.spec as { clusterIP?: string } | undefined)?.clusterIP;
    if (ip && ip !== 'None') return ip;
    ctx.log.warn(
      { event_type: 'collector_unresolved', service: `${namespace}/${name}`, found: Boolean(s) },
      'the trace collector Service has no cluster IP: agents without DNS cannot export spans',
    );
  } catch (e) {
    ctx.log.warn(
      { event_type: 'collector_unresolved', service: `${namespace}/${name}`, error: String(e) },
      'could not read the trace collector Service: agents without DNS cannot export spans',
    );
  }
  return undefined;
}
