import type { V1EnvVar } from '@kubernetes/client-node';
import { STORE_URL_ENV } from '../../api/common.ts';
import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../runtime/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';

export type StoreKind = 'redis' | 'nats' | 'postgres';
export const STORES: readonly StoreKind[] = ['redis', 'nats', 'postgres'];

export const STORE_PORTS: Record<StoreKind, number> = { redis: 6379, nats: 4222, postgres: 5432 };
export const NATS_MONITOR_PORT = 8222;
export const PG_USER = 'holt';
export const PG_DB = 'holt';

/** Name of a bundled store's StatefulSet and client Service. */
export const storeName = (holt: string, store: StoreKind) => childName(holt, store);

/** The generated credentials Secret of a bundled store (Postgres: CloudNativePG's `-app` shape). */
export const storeSecretName = (holt: string, store: StoreKind) =>
  store === 'postgres' ? childName(holt, 'postgres', 'app') : childName(holt, store);

const host = (holt: string, store: StoreKind, ns: string) => `${storeName(holt, store)}.${ns}.svc`;

/**
 * The credentials Secret of a bundled store. Created once with a fresh password and never
 * re-applied: reconciling must not rotate a password that running pods and the data depend on.
 */
export function storeSecret(owner: Owner, store: StoreKind, password: string): KubeObject {
  const holt = owner.name;
  const h = host(holt, store, owner.namespace);
  const port = STORE_PORTS[store];
  const data: Record<string, string> =
    store === 'redis'
      ? { password, url: `redis://:${password}@${h}:${port}` }
      : store === 'nats'
        ? { username: 'holt', password, url: `nats://holt:${password}@${h}:${port}` }
        : {
            username: PG_USER,
            user: PG_USER,
            password,
            dbname: PG_DB,
            host: h,
            port: String(port),
            uri: `postgresql://${PG_USER}:${password}@${h}:${port}/${PG_DB}`,
          };
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(storeSecretName(holt, store), owner, labels(holt, storeName(holt, store), store)),
    type: 'Opaque',
    stringData: data,
  };
}

const fromSecret = (name: string, secret: string, key: string): V1EnvVar => ({
  name,
  valueFrom: { secretKeyRef: { name: secret, key } },
});

/**
 * REDIS_URL, NATS_URL and DATABASE_URL for the Holt's pods: always from Secrets (bundled: the
 * generated ones; external: the user's), except an external URL given literally in the spec.
 */
export function storeEnv(holt: string, stores: HoltSpec['stores']): V1EnvVar[] {
  const url = (store: 'redis' | 'nats'): V1EnvVar => {
    const env = STORE_URL_ENV[store];
    const s = stores[store];
    if (s.mode === 'bundled') return fromSecret(env, storeSecretName(holt, store), 'url');
    if (s.urlSecretRef) return fromSecret(env, s.urlSecretRef.name, s.urlSecretRef.key);
    return { name: env, value: s.url ?? '' };
  };
  const pg = stores.postgres;
  const name = STORE_URL_ENV.postgres;
  const database: V1EnvVar =
    pg.mode === 'bundled'
      ? fromSecret(name, storeSecretName(holt, 'postgres'), 'uri')
      : pg.secretName
        ? fromSecret(name, pg.secretName, 'uri')
        : { name, value: pg.url ?? '' };
  return [url('redis'), url('nats'), database];
}

/** Why an external store is not usable as specified (the CRD's CEL rules say the same). */
export function storeProblems(stores: HoltSpec['stores']): string[] {
  const out: string[] = [];
  for (const s of ['redis', 'nats'] as const) {
    const v = stores[s];
    if (v.mode === 'external' && !v.url && !v.urlSecretRef)
      out.push(`stores.${s}: external needs url or urlSecretRef`);
  }
  const pg = stores.postgres;
  if (pg.mode === 'external' && !pg.secretName && !pg.url)
    out.push('stores.postgres: external needs secretName (CloudNativePG -app keys) or url');
  return out;
}
