import type { V1EnvVar, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { natsUrl } from '../../access/nats.ts';
import { PG_COMPONENTS, PG_OWNER, PG_ROLE, type PgComponent } from '../../access/pg-roles.ts';
import { PRINCIPALS, type Principal } from '../../access/principals.ts';
import { redisUrl } from '../../access/redis.ts';
import { STORE_URL_ENV } from '../../api/common.ts';
import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../kube/kube.ts';
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
/** Postgres (CloudNativePG's `-app` shape): a component role's password and `uri`. */
export const pgPasswordKey = (who: PgComponent) => `${who}-password`;
export const pgUriKey = (who: PgComponent) => `${who}-uri`;

/**
 * The credentials Secret of a bundled store: a password and URL per principal (src/access), so each
 * process holds only its own. Postgres: CloudNativePG's `-app` keys for the superuser (the CLI),
 * plus the schema owner's (migrations) and one role's per component (orchestrator, pup, operator),
 * each with its own tables and columns (src/access/postgres.ts). Created once with fresh
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
    const ownerPw = password();
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
    });
    for (const c of PG_COMPONENTS) {
      const p = password();
      data[pgPasswordKey(c)] = p;
      data[pgUriKey(c)] = uri(PG_ROLE[c], p);
    }
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
  // An older Redis URL for the admin named no user (Redis's `default`, now off): it names `admin`.
  const oldUrl = store === 'redis' && have?.url ? Buffer.from(have.url, 'base64').toString('utf8') : '';
  const adminPw = have?.password ? Buffer.from(have.password, 'base64').toString('utf8') : '';
  if (/^rediss?:\/\/:/.test(oldUrl) && adminPw)
    out.url = redisUrl('admin', adminPw, host(owner.name, store, owner.namespace), STORE_PORTS.redis);
  return out;
}

const fromSecret = (name: string, secret: string, key: string): V1EnvVar => ({
  name,
  valueFrom: { secretKeyRef: { name: secret, key } },
});

/** Where a component reads the bundled stores' CA (ca.crt of the Holt's `stores.tls` Secret). */
export const STORE_CA_DIR = '/etc/holt/store-ca';

/** The bundled stores serve TLS: some store is bundled and the Holt names a certificate. */
export const storesTls = (stores: HoltSpec['stores']): { secretName: string } | undefined =>
  stores.tls && STORES.some((s) => stores[s].mode === 'bundled') ? stores.tls : undefined;

/**
 * What a pod that connects to the stores needs for their TLS: the CA (only ca.crt, never the key),
 * trusted by Node through NODE_EXTRA_CA_CERTS, and Postgres told to verify (PGSSLMODE, which
 * node-postgres reads when the URL names no sslmode). Nothing without `stores.tls`.
 */
export function storeTlsClient(stores: HoltSpec['stores']): {
  env: V1EnvVar[];
  volumes: V1Volume[];
  mounts: V1VolumeMount[];
} {
  const tls = storesTls(stores);
  if (!tls) return { env: [], volumes: [], mounts: [] };
  return {
    env: [
      { name: 'NODE_EXTRA_CA_CERTS', value: `${STORE_CA_DIR}/ca.crt` },
      ...(stores.postgres.mode === 'bundled' ? [{ name: 'PGSSLMODE', value: 'verify-full' }] : []),
    ],
    volumes: [
      {
        name: 'store-ca',
        secret: { secretName: tls.secretName, items: [{ key: 'ca.crt', path: 'ca.crt' }] },
      },
    ],
    mounts: [{ name: 'store-ca', mountPath: STORE_CA_DIR, readOnly: true }],
  };
}

/**
 * REDIS_URL, NATS_URL and DATABASE_URL for one kind of client: always from Secrets (bundled: that
 * client's own user; external: its own user where `users` names one, else the store's one
 * credential), except an external URL given literally.
 * The migration Job gets the database only, as the schema's owner. A bundled Redis behind TLS is
 * `rediss://`: the URL is put together in the pod from the Secret's password ($(VAR) expansion), so
 * turning TLS on or off rewrites no Secret. (NATS clients upgrade when the server requires TLS.)
 */
export function storeEnv(holt: string, stores: HoltSpec['stores'], who: StoreClient): V1EnvVar[] {
  const url = (store: 'redis' | 'nats'): V1EnvVar[] => {
    const env = STORE_URL_ENV[store];
    const s = stores[store];
    if (s.mode === 'bundled' && store === 'redis' && storesTls(stores)) {
      const pw = 'HOLT_REDIS_PASSWORD';
      const secret = storeSecretName(holt, store);
      return [
        fromSecret(pw, secret, passwordKey(who as Principal)),
        // The Service's short name (the pod's own namespace): the certificate names it.
        {
          name: env,
          value: redisUrl(who as Principal, `$(${pw})`, storeName(holt, store), STORE_PORTS.redis, true),
        },
      ];
    }
    if (s.mode === 'bundled')
      return [fromSecret(env, storeSecretName(holt, store), urlKey(who as Principal))];
    const own = who === 'migrate' ? undefined : s.users?.[who];
    if (own) return [fromSecret(env, own.urlSecretRef.name, own.urlSecretRef.key)];
    if (s.urlSecretRef) return [fromSecret(env, s.urlSecretRef.name, s.urlSecretRef.key)];
    return [{ name: env, value: s.url ?? '' }];
  };
  const pg = stores.postgres;
  const name = STORE_URL_ENV.postgres;
  const role = who === 'migrate' ? undefined : pg.users?.[who];
  const database: V1EnvVar[] =
    pg.mode === 'bundled'
      ? [fromSecret(name, storeSecretName(holt, 'postgres'), who === 'migrate' ? 'owner-uri' : pgUriKey(who))]
      : pg.secretName && role
        ? externalRoleEnv(pg.secretName, role.secretName)
        : pg.secretName
          ? [fromSecret(name, pg.secretName, 'uri')]
          : [{ name, value: pg.url ?? '' }];
  return who === 'migrate' ? database : [...url('redis'), ...url('nats'), ...database];
}

/**
 * An external Postgres as a component's own role: the server of the `-app` Secret (host, port,
 * dbname) in a URL without credentials, the role's from its basic-auth Secret in PGUSER and
 * PGPASSWORD, which node-postgres reads when the URL names none (so a password needs no escaping).
 */
function externalRoleEnv(appSecret: string, roleSecret: string): V1EnvVar[] {
  const part = (v: string, key: string) => fromSecret(`HOLT_DATABASE_${v}`, appSecret, key);
  return [
    part('HOST', 'host'),
    part('PORT', 'port'),
    part('NAME', 'dbname'),
    {
      name: STORE_URL_ENV.postgres,
      value: 'postgresql://$(HOLT_DATABASE_HOST):$(HOLT_DATABASE_PORT)/$(HOLT_DATABASE_NAME)',
    },
    fromSecret('PGUSER', roleSecret, 'username'),
    fromSecret('PGPASSWORD', roleSecret, 'password'),
  ];
}

/**
 * The operator's own URL for an external Postgres with a role of its own (it connects from its
 * process, not a pod): the role's name and password from its basic-auth Secret, escaped, at the host,
 * port and dbname of the `-app` Secret.
 */
export function externalRoleUrl(
  role: { username: string; password: string },
  app: { host: string; port: string; dbname: string },
): string {
  const e = encodeURIComponent;
  return `postgresql://${e(role.username)}:${e(role.password)}@${app.host}:${app.port}/${e(app.dbname)}`;
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
