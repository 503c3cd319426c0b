import type { V1EnvVar } from '@kubernetes/client-node';
import { natsUrl } from '../../access/nats.ts';
import { PG_APP, PG_OWNER } from '../../access/postgres.ts';
import { PRINCIPALS, type Principal } from '../../access/principals.ts';
import { redisUrl } from '../../access/redis.ts';
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

/** Who connects to the Holt's stores from its pods (the operator reads its own keys itself). */
export type StoreClient = 'orchestrator' | 'pup' | 'migrate';

/** The Secret key of a principal's password and URL (`admin` keeps the plain `password`/`url`). */
export const passwordKey = (who: Principal) => (who === 'admin' ? 'password' : `${who}-password`);
export const urlKey = (who: Principal) => (who === 'admin' ? 'url' : `${who}-url`);

/**
 * The credentials Secret of a bundled store: a password and URL per principal (src/access), so each
 * process holds only its own. Postgres: CloudNativePG's `-app` keys for the superuser (the CLI),
 * plus the schema owner's (migrations) and the runtime role's (DML only). Created once with fresh
 * passwords and never re-applied: reconciling must not rotate what running pods and the data use.
 */
export function storeSecret(owner: Owner, store: StoreKind, password: () => string): KubeObject {
  const holt = owner.name;
  const h = host(holt, store, owner.namespace);
  const port = STORE_PORTS[store];
  const data: Record<string, string> = {};
  if (store === 'redis' || store === 'nats')
    for (const who of PRINCIPALS) {
      const pw = password();
      data[passwordKey(who)] = pw;
      data[urlKey(who)] = store === 'redis' ? redisUrl(who, pw, h, port) : natsUrl(who, pw, h, port);
    }
  if (store === 'nats') data.username = 'admin';
  if (store === 'postgres') {
    const pw = password();
    const [ownerPw, appPw] = [password(), password()];
    const uri = (user: string, p: string) => `postgresql://${user}:${p}@${h}:${port}/${PG_DB}`;
    Object.assign(data, {
      username: PG_USER,
      user: PG_USER,
      password: pw,
      dbname: PG_DB,
      host: h,
      port: String(port),
      uri: uri(PG_USER, pw),
      'owner-password': ownerPw,
      'owner-uri': uri(PG_OWNER, ownerPw),
      'app-password': appPw,
      'app-uri': uri(PG_APP, appPw),
    });
  }
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(storeSecretName(holt, store), owner, labels(holt, storeName(holt, store), store)),
    type: 'Opaque',
    stringData: data,
  };
}

/**
 * The keys a store Secret made before per-principal users lacks (an operator upgrade), with fresh
 * passwords; what it has is kept, so the admin password and the data stay as they are. Empty when
 * nothing is missing. Values are the Secret's `data` (base64), as read from the API.
 */
export function missingSecretKeys(
  owner: Owner,
  store: StoreKind,
  have: Record<string, string> | undefined,
  password: () => string,
): Record<string, string> {
  const desired = storeSecret(owner, store, password).stringData as Record<string, string>;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(desired)) if (!have?.[k]) out[k] = v;
  // A URL must carry the password that sits beside it: one made for a password already there is
  // rebuilt with that password.
  for (const k of Object.keys(out)) {
    const pwKey = k.endsWith('-url')
      ? k.replace(/-url$/, '-password')
      : k.endsWith('-uri')
        ? k.replace(/-uri$/, '-password')
        : undefined;
    const kept = pwKey && have?.[pwKey] ? Buffer.from(have[pwKey], 'base64').toString('utf8') : undefined;
    if (kept && pwKey && desired[pwKey]) out[k] = out[k]!.replace(desired[pwKey]!, kept);
  }
  return out;
}

const fromSecret = (name: string, secret: string, key: string): V1EnvVar => ({
  name,
  valueFrom: { secretKeyRef: { name: secret, key } },
});

/**
 * REDIS_URL, NATS_URL and DATABASE_URL for one kind of client: always from Secrets (bundled: that
 * client's own user; external: the user's one credential), except an external URL given literally.
 * The migration Job gets the database only, as the schema's owner.
 */
export function storeEnv(holt: string, stores: HoltSpec['stores'], who: StoreClient): V1EnvVar[] {
  const url = (store: 'redis' | 'nats'): V1EnvVar => {
    const env = STORE_URL_ENV[store];
    const s = stores[store];
    if (s.mode === 'bundled') return fromSecret(env, storeSecretName(holt, store), urlKey(who as Principal));
    if (s.urlSecretRef) return fromSecret(env, s.urlSecretRef.name, s.urlSecretRef.key);
    return { name: env, value: s.url ?? '' };
  };
  const pg = stores.postgres;
  const name = STORE_URL_ENV.postgres;
  const database: V1EnvVar =
    pg.mode === 'bundled'
      ? fromSecret(name, storeSecretName(holt, 'postgres'), who === 'migrate' ? 'owner-uri' : 'app-uri')
      : pg.secretName
        ? fromSecret(name, pg.secretName, 'uri')
        : { name, value: pg.url ?? '' };
  return who === 'migrate' ? [database] : [url('redis'), url('nats'), database];
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
