import { lookup } from 'node:dns/promises';
import type { HoltSpec } from '../../api/holt.ts';
import type { Cache } from '../kube/cache.ts';
import type { KubeClient } from '../kube/kube.ts';
import { type CollectorService, collectorService } from '../specs/networkpolicy.ts';
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
 * half minute, or, where the operator may not read Services there (a namespaced install), its name is
 * resolved through the operator's own cluster DNS. One found neither way is left out, and a later
 * resync puts it in.
 */
export async function podAddresses(
  ctx: Pick<ControllerContext, 'cache' | 'client' | 'log' | 'resolveHost'>,
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
  ctx: Pick<ControllerContext, 'client' | 'log' | 'resolveHost'>,
  endpoint: string | undefined,
): Promise<{ host: string; ip: string } | undefined> {
  const svc = collectorService(endpoint);
  if (!svc) return undefined;
  const memo = collectorIps.get(ctx.client) ?? new Map();
  collectorIps.set(ctx.client, memo);
  const key = `${svc.namespace}/${svc.name}`;
  let hit = memo.get(key);
  if (!hit || Date.now() - hit.atMs >= COLLECTOR_TTL_MS) {
    hit = { ip: await readClusterIp(ctx, svc), atMs: Date.now() };
    memo.set(key, hit);
  }
  return hit.ip ? { host: svc.host, ip: hit.ip } : undefined;
}

const resolveByDns = async (host: string) => (await lookup(host)).address;

async function readClusterIp(
  ctx: Pick<ControllerContext, 'client' | 'log' | 'resolveHost'>,
  svc: CollectorService,
): Promise<string | undefined> {
  const service = `${svc.namespace}/${svc.name}`;
  let why: string;
  try {
    const s = await ctx.client.get('Service', svc.namespace, svc.name);
    const ip = (s?.spec as { clusterIP?: string } | undefined)?.clusterIP;
    if (ip && ip !== 'None') return ip;
    why = s ? 'it has no cluster IP' : 'no such Service';
  } catch (e) {
    why = String(e);
  }
  try {
    return await (ctx.resolveHost ?? resolveByDns)(svc.host);
  } catch (e) {
    ctx.log.warn(
      { event_type: 'collector_unresolved', service, error: `${why}; DNS: ${String(e)}` },
      'the trace collector Service has no address the operator can find: agents without DNS cannot export spans',
    );
    return undefined;
  }
}
