import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { natsAuthorization, natsUrl } from '../../src/access/nats.ts';
import { PG_COMPONENTS, PG_ROLE, type PgComponent } from '../../src/access/pg-roles.ts';
import { newPasswords, type Principal } from '../../src/access/principals.ts';
import { redisAclLines, redisUrl } from '../../src/access/redis.ts';
import { NS, ROOT } from './ctx.ts';
import { GIT_SECRET } from './fixtures.ts';
import { holtLabel, yamlDocs } from './manifests.ts';

/**
 * Stores a Holt does not own, as a platform team runs them: Redis, NATS and Postgres as plain pods in
 * a namespace of their own, each with a user per component (Redis ACL users, NATS users, Postgres
 * login roles as CloudNativePG's managed roles make them), and the Secrets the Holt reads in its
 * namespace: CloudNativePG's `<cluster>-app` shape for the database's owner, a basic-auth Secret per
 * role, a URL per component for Redis and NATS.
 */
export const STORES_NS = 'holt-e2e-stores';
export const EXT = 'ext';
const COMPONENTS = ['orchestrator', 'pup', 'operator'] as const;

export interface ExternalStores {
  /** The platform's side (namespace STORES_NS). */
  stores: string;
  /** The Holt's side (namespace NS): the Secrets, the Holt and the demo's agents. */
  holt: string;
  /** Redis's admin password (the test reads who is connected). */
  redisAdmin: string;
  /** What the platform runs as the superuser once Postgres is up: the app user and database, the roles. */
  rolesSql: string;
}

const hex = () => randomBytes(24).toString('hex');
const host = (svc: string) => `${svc}.${STORES_NS}.svc`;

const secret = (name: string, ns: string, data: Record<string, string>, type = 'Opaque') => ({
  apiVersion: 'v1',
  kind: 'Secret',
  // The Holt's side carries its label: the test deletes it by that.
  metadata: { name, namespace: ns, ...(ns === NS ? { labels: holtLabel(EXT) } : {}) },
  type,
  stringData: data,
});

/** A store as a bare pod behind a Service: no operator, no PVC, a short grace to delete fast. */
function storePod(
  name: string,
  image: string,
  uid: number,
  port: number,
  container: Record<string, unknown>,
  volumes: Record<string, unknown>[],
) {
  const labels = { app: name };
  return [
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: STORES_NS, labels },
      spec: {
        terminationGracePeriodSeconds: 2,
        securityContext: {
          runAsNonRoot: true,
          runAsUser: uid,
          runAsGroup: uid,
          fsGroup: uid,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containers: [
          {
            name,
            image,
            imagePullPolicy: 'IfNotPresent',
            ports: [{ name: 'client', containerPort: port }],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            ...container,
          },
        ],
        volumes,
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: STORES_NS },
      // A named target port: the CLI maps the Service's port to the pod's.
      spec: { selector: labels, ports: [{ port, targetPort: 'client' }] },
    },
  ];
}

/** examples/k8s/demo.yaml as Holt `ext` (its own ConfigMap and Agents) on the external stores. */
function demoOnExternal(): Record<string, unknown>[] {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'examples', 'k8s', 'demo.yaml'), 'utf8')).map(
    (d) => d.toJS() as { kind: string; metadata: Record<string, unknown>; spec?: Record<string, unknown> },
  );
  const users = (s: 'redis' | 'nats') =>
    Object.fromEntries(
      COMPONENTS.map((c) => [c, { urlSecretRef: { name: `${EXT}-${s}-${c}`, key: 'url' } }]),
    );
  return docs.map((d) => {
    const name = String(d.metadata.name).replace(/^demo/, EXT);
    if (d.kind === 'ConfigMap') return { ...d, metadata: { ...d.metadata, name, labels: holtLabel(EXT) } };
    if (d.kind === 'Holt')
      return {
        ...d,
        metadata: { ...d.metadata, name },
        spec: {
          ...d.spec,
          orchestrator: { ...(d.spec?.orchestrator as object), bidTimeoutSeconds: 120 },
          workspace: {
            ...(d.spec?.workspace as object),
            gitUrl: `http://git.${NS}.svc:8080/demo.git`,
            gitSecretRef: { name: GIT_SECRET },
          },
          stores: {
            redis: {
              mode: 'external',
              urlSecretRef: { name: `${EXT}-redis`, key: 'url' },
              users: users('redis'),
            },
            nats: {
              mode: 'external',
              urlSecretRef: { name: `${EXT}-nats`, key: 'url' },
              users: users('nats'),
            },
            postgres: {
              mode: 'external',
              secretName: `${EXT}-pg-app`,
              users: Object.fromEntries(COMPONENTS.map((c) => [c, { secretName: `${EXT}-pg-${c}` }])),
            },
          },
        },
      };
    const spec = d.spec ?? {};
    const volumes = (spec.volumes as { configMap?: string }[] | undefined)?.map((v) =>
      v.configMap === 'demo-agents' ? { ...v, configMap: `${EXT}-agents` } : v,
    );
    return {
      ...d,
      metadata: { ...d.metadata, name, labels: holtLabel(EXT) },
      spec: { ...spec, holt: EXT, ...(volumes ? { volumes } : {}) },
    };
  });
}

/** Both sides, with fresh passwords. */
export function externalStores(): ExternalStores {
  const redisPw = newPasswords();
  const natsPw = newPasswords();
  const pgSuper = hex();
  const appPw = hex();
  // Passwords a platform team might pick: URL-reserved characters in them (the pods never put them in a URL).
  const rolePw = Object.fromEntries(PG_COMPONENTS.map((c) => [c, `${hex()}/+=:@`])) as Record<
    PgComponent,
    string
  >;
  const sql = (s: string) => `'${s.replace(/'/g, "''")}'`;
  const initSql = [
    // CloudNativePG's bootstrap: the app user owns the app database; it is no superuser.
    `CREATE ROLE app LOGIN PASSWORD ${sql(appPw)};`,
    'CREATE DATABASE app OWNER app;',
    // Its managed roles: login roles, nothing more, passwords from their Secrets.
    ...PG_COMPONENTS.map((c) => `CREATE ROLE ${PG_ROLE[c]} LOGIN PASSWORD ${sql(rolePw[c])};`),
  ].join('\n');
  const redisConf = ['port 6379', 'appendonly no', 'save ""', ...redisAclLines(EXT, redisPw)].join('\n');
  const natsConf = ['port: 4222', 'http_port: 8222', natsAuthorization(natsPw, { instance: EXT })].join('\n');
  const cfg = secret('store-config', STORES_NS, { 'redis.conf': redisConf, 'nats.conf': natsConf });
  const configVolume = (key: string) => [
    { name: 'config', secret: { secretName: 'store-config', items: [{ key, path: key }] } },
  ];
  const configAt = (path: string) => ({
    volumeMounts: [{ name: 'config', mountPath: path, readOnly: true }],
  });
  const stores = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: STORES_NS } },
    cfg,
    ...storePod(
      'redis',
      'redis:7-alpine',
      999,
      6379,
      {
        args: ['redis-server', '/etc/redis/redis.conf'],
        ...configAt('/etc/redis'),
        readinessProbe: { tcpSocket: { port: 'client' }, periodSeconds: 2 },
      },
      configVolume('redis.conf'),
    ),
    ...storePod(
      'nats',
      'nats:2-alpine',
      1000,
      4222,
      {
        args: ['nats-server', '-c', '/etc/nats/nats.conf'],
        ...configAt('/etc/nats'),
        readinessProbe: { httpGet: { path: '/healthz', port: 8222 }, periodSeconds: 2 },
      },
      configVolume('nats.conf'),
    ),
    ...storePod(
      'postgres',
      'postgres:17-alpine',
      70,
      5432,
      {
        // Every connection in the log, with its user: the test reads who connected.
        args: ['postgres', '-c', 'log_connections=on'],
        env: [
          { name: 'POSTGRES_PASSWORD', value: pgSuper },
          { name: 'PGDATA', value: '/var/lib/postgresql/data/pgdata' },
        ],
        volumeMounts: [{ name: 'data', mountPath: '/var/lib/postgresql/data' }],
        readinessProbe: {
          exec: { command: ['pg_isready', '-h', '127.0.0.1', '-U', 'postgres'] },
          periodSeconds: 2,
        },
      },
      [{ name: 'data', emptyDir: {} }],
    ),
  ];
  const pgHost = host('postgres');
  // A Secret per user, as a platform hands them out: the store's one credential (the CLI's, and any
  // component's not named: the admin user), then one per component.
  const urlSecrets = (store: 'redis' | 'nats', pw: Record<Principal, string>) => {
    const url = (who: Principal) =>
      store === 'redis'
        ? redisUrl(who, pw[who], host('redis'), 6379)
        : natsUrl(who, pw[who], host('nats'), 4222);
    return [
      secret(`${EXT}-${store}`, NS, { url: url('admin') }),
      ...COMPONENTS.map((c) => secret(`${EXT}-${store}-${c}`, NS, { url: url(c) })),
    ];
  };
  const holtSide = [
    secret(`${EXT}-pg-app`, NS, {
      username: 'app',
      user: 'app',
      password: appPw,
      dbname: 'app',
      host: pgHost,
      port: '5432',
      uri: `postgresql://app:${appPw}@${pgHost}:5432/app`,
    }),
    ...PG_COMPONENTS.map((c) =>
      secret(`${EXT}-pg-${c}`, NS, { username: PG_ROLE[c], password: rolePw[c] }, 'kubernetes.io/basic-auth'),
    ),
    ...urlSecrets('redis', redisPw),
    ...urlSecrets('nats', natsPw),
    ...demoOnExternal(),
  ];
  return { stores: yamlDocs(stores), holt: yamlDocs(holtSide), redisAdmin: redisPw.admin, rolesSql: initSql };
}
