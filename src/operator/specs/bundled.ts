import type { V1Container, V1EnvVar, V1StatefulSetSpec } from '@kubernetes/client-node';
import { natsAuthorization } from '../../access/nats.ts';
import { type Passwords, PRINCIPALS, type Principal } from '../../access/principals.ts';
import { REDIS_USER, redisAclTemplate } from '../../access/redis.ts';
import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../kube/kube.ts';
import { labels, meta, type Owner, selectorLabels } from './meta.ts';
import { containerSecurity, execProbe, httpProbe, podSecurity, resourcesOf } from './pod.ts';
import {
  NATS_MONITOR_PORT,
  PG_DB,
  PG_USER,
  passwordKey,
  STORE_PORTS,
  type StoreKind,
  storeName,
  storeSecretName,
} from './stores.ts';
import { natsToolEnv, natsToolUsers } from './tool-secrets.ts';

/** Official images only (never Bitnami's, whose versioned tags moved to an unmaintained registry). */
export const STORE_IMAGES: Record<StoreKind, string> = {
  redis: 'redis:7-alpine',
  nats: 'nats:2-alpine',
  postgres: 'postgres:17-alpine',
};

/** The user each official image runs its server as (redis and postgres alpine images) or a free uid. */
const STORE_UID: Record<StoreKind, number> = { redis: 999, nats: 1000, postgres: 70 };

const secretEnv = (name: string, secret: string, key: string): V1EnvVar => ({
  name,
  valueFrom: { secretKeyRef: { name: secret, key } },
});

/** The env variable a store's start script reads a principal's password from. */
const passwordVar = (who: Principal) => `HOLT_${who.toUpperCase()}_PASSWORD`;
const principalEnv = (secret: string): V1EnvVar[] =>
  PRINCIPALS.map((p) => secretEnv(passwordVar(p), secret, passwordKey(p)));

/**
 * A start script: the config (passwords expanded from the env by the here-document) into a 0600
 * file, then the server. Passwords are hex and rules hold no `$`, `\` or backquote, so the expansion
 * changes nothing but the variables.
 */
export function configScript(file: string, lines: string[], exec: string): string {
  return `umask 077\ncat > ${file} <<EOF\n${lines.join('\n')}\nEOF\nexec ${exec}\n`;
}

interface StoreContainer {
  container: Omit<V1Container, 'name' | 'image' | 'securityContext' | 'resources' | 'volumeMounts'>;
  dataPath: string;
  /** Writable scratch dirs the server needs besides its data (the root filesystem is read-only). */
  scratch: string[];
  ports: { name: string; port: number }[];
}

/** Where a bundled store reads its certificate (the Holt's `stores.tls` Secret). */
const TLS_DIR = '/tls';
const TLS_FILES = { cert: `${TLS_DIR}/tls.crt`, key: `${TLS_DIR}/tls.key`, ca: `${TLS_DIR}/ca.crt` };

function storeContainer(holt: string, store: StoreKind, tls: boolean, natsTools: string[]): StoreContainer {
  const secret = storeSecretName(holt, store);
  const port = STORE_PORTS[store];
  // redis-cli on the pod's loopback: the CA checks the chain (redis-cli names no host to verify).
  // As `admin` (REDISCLI_AUTH holds its password): Redis's `default` user is off.
  const redisCli = [
    'redis-cli',
    '--user',
    REDIS_USER.admin,
    ...(tls ? ['--tls', '--cacert', TLS_FILES.ca] : []),
    'ping',
  ];
  if (store === 'redis')
    return {
      dataPath: '/data',
      scratch: ['/tmp'],
      ports: [{ name: 'redis', port }],
      container: {
        // One ACL user per principal, written to a 0600 file in the pod's scratch: never on a command line.
        command: [
          'sh',
          '-c',
          configScript(
            '/tmp/redis.conf',
            [
              'dir /data',
              'appendonly yes',
              // Never evict blackboard data, and refuse writes before the kernel kills the pod: 80% of
              // the container's memory limit (the node's memory when none is set).
              'maxmemory-policy noeviction',
              'maxmemory $((REDIS_MEMORY_LIMIT / 10 * 8))',
              // With TLS the plain port is closed: every client, the probes included, speaks TLS.
              ...(tls
                ? [
                    'port 0',
                    `tls-port ${port}`,
                    `tls-cert-file ${TLS_FILES.cert}`,
                    `tls-key-file ${TLS_FILES.key}`,
                    `tls-ca-cert-file ${TLS_FILES.ca}`,
                    'tls-auth-clients no',
                  ]
                : []),
              ...redisAclTemplate(holt, passwordVar),
            ],
            'redis-server /tmp/redis.conf',
          ),
        ],
        env: [
          ...principalEnv(secret),
          secretEnv('REDISCLI_AUTH', secret, passwordKey('admin')),
          {
            name: 'REDIS_MEMORY_LIMIT',
            valueFrom: { resourceFieldRef: { containerName: 'redis', resource: 'limits.memory' } },
          },
        ],
        ports: [{ name: 'redis', containerPort: port }],
        startupProbe: { tcpSocket: { port: 'redis' }, periodSeconds: 2, failureThreshold: 30 },
        livenessProbe: execProbe(redisCli, 10, 3),
        readinessProbe: execProbe(redisCli, 5, 3),
      },
    };
  if (store === 'nats')
    return {
      dataPath: '/data',
      scratch: ['/tmp'],
      ports: [
        { name: 'client', port },
        { name: 'monitor', port: NATS_MONITOR_PORT },
      ],
      container: {
        command: [
          'sh',
          '-c',
          configScript(
            '/tmp/nats.conf',
            [
              `port: ${port}`,
              `http_port: ${NATS_MONITOR_PORT}`,
              'jetstream { store_dir: "/data" }',
              // Lame duck (preStop) ends within the pod's grace period: NATS ignores SIGTERM while in it,
              // so its 2 min default held every pod deletion (and a namespace's) for the full 60 s (30 s is NATS's least).
              'lame_duck_grace_period: "3s"',
              'lame_duck_duration: "30s"',
              // Clients must speak TLS (the monitoring port, probes only, stays plain).
              ...(tls ? [`tls { cert_file: "${TLS_FILES.cert}", key_file: "${TLS_FILES.key}" }`] : []),
              // The principals at any instance (the NATS is the Holt's own); a user per asynchronous
              // NATS tool (tool-secrets.ts), bound to the Holt's instance and that tool only.
              natsAuthorization(
                Object.fromEntries(PRINCIPALS.map((p) => [p, `$${passwordVar(p)}`])) as Passwords,
                { tools: natsToolUsers(natsTools), toolInstance: holt },
              ),
            ],
            'nats-server -c /tmp/nats.conf',
          ),
        ],
        // A changed set of tools changes the pod template: the StatefulSet restarts NATS (same set: nothing).
        env: [...principalEnv(secret), ...natsToolEnv(holt, natsTools)],
        ports: [
          { name: 'client', containerPort: port },
          { name: 'monitor', containerPort: NATS_MONITOR_PORT },
        ],
        startupProbe: httpProbe('/healthz', 'monitor', 2, 90),
        livenessProbe: httpProbe('/healthz?js-enabled-only=true', 'monitor', 30, 3),
        readinessProbe: httpProbe('/healthz?js-server-only=true', 'monitor', 10, 3),
        // Lame-duck mode lets clients move away before the server stops.
        lifecycle: { preStop: { exec: { command: ['nats-server', '--signal', 'ldm'] } } },
      },
    };
  const ready = ['pg_isready', '-U', PG_USER, '-d', PG_DB, '-h', '127.0.0.1'];
  return {
    dataPath: '/var/lib/postgresql/data',
    scratch: ['/tmp', '/var/run/postgresql'],
    ports: [{ name: 'postgres', port }],
    container: {
      // TLS next to the plain socket: clients over the network ask for it (PGSSLMODE=verify-full).
      ...(tls
        ? {
            args: [
              '-c',
              'ssl=on',
              '-c',
              `ssl_cert_file=${TLS_FILES.cert}`,
              '-c',
              `ssl_key_file=${TLS_FILES.key}`,
            ],
          }
        : {}),
      env: [
        { name: 'POSTGRES_USER', value: PG_USER },
        { name: 'POSTGRES_DB', value: PG_DB },
        secretEnv('POSTGRES_PASSWORD', secret, 'password'),
        // A subdirectory: the PVC root may hold lost+found, which initdb refuses.
        { name: 'PGDATA', value: '/var/lib/postgresql/data/pgdata' },
      ],
      ports: [{ name: 'postgres', containerPort: port }],
      startupProbe: execProbe(ready, 2, 60),
      livenessProbe: execProbe(ready, 10, 6),
      readinessProbe: execProbe(ready, 5, 3),
    },
  };
}

/**
 * StatefulSet, headless + client Service and PDB of one bundled store. `natsTools`: the asynchronous
 * NATS tools (sorted, each once) whose users the bundled NATS has, each password from its Secret.
 */
export function bundledStore(
  owner: Owner,
  store: StoreKind,
  spec: HoltSpec['stores'][StoreKind],
  tls?: { secretName: string },
  natsTools: string[] = [],
): KubeObject[] {
  const holt = owner.name;
  const name = storeName(holt, store);
  const lbls = labels(holt, name, store);
  const sel = selectorLabels(name, store);
  const c = storeContainer(holt, store, tls !== undefined, natsTools);
  const uid = STORE_UID[store];
  const scratchVolumes = c.scratch.map((_, i) => ({ name: `scratch-${i}`, emptyDir: {} }));
  const sts: V1StatefulSetSpec = {
    replicas: 1,
    serviceName: `${name}-hl`,
    selector: { matchLabels: sel },
    podManagementPolicy: 'Parallel',
    // Dev-sized bundled stores keep their data when the Holt is deleted only if the user asks the
    // PVC to be retained; the default follows the Holt's lifetime.
    persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Delete', whenScaled: 'Retain' },
    template: {
      metadata: { labels: lbls },
      spec: {
        automountServiceAccountToken: false,
        securityContext: podSecurity(uid),
        terminationGracePeriodSeconds: store === 'nats' ? 60 : 30,
        containers: [
          {
            name: store,
            image: spec.image ?? STORE_IMAGES[store],
            ...c.container,
            resources: resourcesOf(spec.resources, { requests: { cpu: '50m', memory: '64Mi' } }),
            securityContext: containerSecurity(),
            volumeMounts: [
              { name: 'data', mountPath: c.dataPath },
              ...c.scratch.map((p, i) => ({ name: `scratch-${i}`, mountPath: p })),
              ...(tls ? [{ name: 'tls', mountPath: TLS_DIR, readOnly: true }] : []),
            ],
          },
        ],
        // The key readable by the server's group only (fsGroup): Postgres refuses a key others can read.
        volumes: [
          ...scratchVolumes,
          ...(tls ? [{ name: 'tls', secret: { secretName: tls.secretName, defaultMode: 0o440 } }] : []),
        ],
      },
    },
    volumeClaimTemplates: [
      {
        metadata: { name: 'data', labels: lbls },
        spec: {
          accessModes: ['ReadWriteOnce'],
          resources: { requests: { storage: spec.storage } },
          ...(spec.storageClassName ? { storageClassName: spec.storageClassName } : {}),
        },
      },
    ],
  };
  const ports = c.ports.map((p) => ({ name: p.name, port: p.port, targetPort: p.name }));
  return [
    { apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: meta(name, owner, lbls), spec: sts },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(name, owner, lbls),
      spec: { type: 'ClusterIP', selector: sel, ports },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(`${name}-hl`, owner, lbls),
      spec: { clusterIP: 'None', publishNotReadyAddresses: true, selector: sel, ports },
    },
    {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: meta(name, owner, lbls),
      // One replica: maxUnavailable 1 documents intent without blocking node drains forever.
      spec: { maxUnavailable: 1, selector: { matchLabels: sel } },
    },
  ];
}
