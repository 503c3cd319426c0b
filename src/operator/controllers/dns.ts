import type { Cache } from '../kube/cache.ts';
import type { StoreAddresses } from '../specs/pup.ts';
import { STORES, type StoreKind, storeName } from '../specs/stores.ts';

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
