import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import { secretNamesIn } from '../secrets.ts';
import { bundledStore } from './bundled.ts';
import { migrationJob } from './migration.ts';
import { externalRoleUrl, missingSecretKeys, storeEnv, storeTlsClient } from './stores.ts';

const owner = { apiVersion: 'holt.io/v1alpha1', kind: 'Holt', name: 'demo', namespace: 'team', uid: 'u1' };
type Pod = {
  containers: {
    args?: string[];
    command?: string[];
    env?: unknown[];
    volumeMounts: { name: string; mountPath: string }[];
  }[];
  volumes: { name: string; secret?: { secretName: string; defaultMode?: number } }[];
};
const podOf = (objs: ReturnType<typeof bundledStore>) =>
  (objs[0]!.spec as { template: { spec: Pod } }).template.spec;

describe('stores over TLS', () => {
  const plain = HoltSpec.parse({});
  const tls = HoltSpec.parse({ stores: { tls: { secretName: 'demo-cert' } } });

  it('without stores.tls nothing changes: plain URLs from the Secret, no CA, no certificate mounted', () => {
    expect(storeTlsClient(plain.stores)).toEqual({ env: [], volumes: [], mounts: [] });
    expect(storeEnv('demo', plain.stores, 'pup').map((e) => e.name)).toEqual([
      'REDIS_URL',
      'NATS_URL',
      'DATABASE_URL',
    ]);
    const redis = podOf(bundledStore(owner, 'redis', plain.stores.redis));
    expect(redis.volumes.some((v) => v.name === 'tls')).toBe(false);
    // Data, not a cache: never evicted; writes refused at 80% of the container's memory limit.
    const c = redis.containers[0]!;
    expect(c.command!.join(' ')).toContain(
      'maxmemory-policy noeviction\nmaxmemory $((REDIS_MEMORY_LIMIT / 10 * 8))',
    );
    expect(c.env).toContainEqual({
      name: 'REDIS_MEMORY_LIMIT',
      valueFrom: { resourceFieldRef: { containerName: 'redis', resource: 'limits.memory' } },
    });
  });

  it('with it: Redis is rediss:// put together from the Secret, Node trusts the CA, Postgres verifies', () => {
    const env = storeEnv('demo', tls.stores, 'pup');
    expect(env[0]).toEqual({
      name: 'HOLT_REDIS_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'demo-redis', key: 'pup-password' } },
    });
    expect(env[1]).toEqual({
      name: 'REDIS_URL',
      value: 'rediss://pup:$(HOLT_REDIS_PASSWORD)@demo-redis:6379',
    });
    const c = storeTlsClient(tls.stores);
    expect(c.env).toEqual([
      { name: 'NODE_EXTRA_CA_CERTS', value: '/etc/holt/store-ca/ca.crt' },
      { name: 'PGSSLMODE', value: 'verify-full' },
    ]);
    // The CA only: the key never reaches a component.
    expect(c.volumes).toEqual([
      { name: 'store-ca', secret: { secretName: 'demo-cert', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
    ]);
  });

  it('each bundled store serves with the certificate, the key readable by its group only', () => {
    for (const s of ['redis', 'nats', 'postgres'] as const) {
      const pod = podOf(bundledStore(owner, s, tls.stores[s], tls.stores.tls));
      expect(pod.volumes.find((v) => v.name === 'tls')?.secret).toEqual({
        secretName: 'demo-cert',
        defaultMode: 0o440,
      });
      expect(pod.containers[0]!.volumeMounts).toContainEqual({
        name: 'tls',
        mountPath: '/tls',
        readOnly: true,
      });
    }
    const script = (s: 'redis' | 'nats') =>
      podOf(bundledStore(owner, s, tls.stores[s], tls.stores.tls)).containers[0]!.command!.join(' ');
    expect(script('redis')).toContain('port 0\ntls-port 6379\ntls-cert-file /tls/tls.crt');
    expect(script('nats')).toContain('tls { cert_file: "/tls/tls.crt", key_file: "/tls/tls.key" }');
    expect(
      podOf(bundledStore(owner, 'postgres', tls.stores.postgres, tls.stores.tls)).containers[0]!.args,
    ).toEqual(['-c', 'ssl=on', '-c', 'ssl_cert_file=/tls/tls.crt', '-c', 'ssl_key_file=/tls/tls.key']);
  });
});

describe('Postgres users per component', () => {
  const spec = HoltSpec.parse({});
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  let n = 0;
  const password = () => `pw${String(++n).padStart(46, '0')}`;

  it('each component connects as its own role; the migration Job as the owner, making every role', () => {
    const dbKey = (who: 'orchestrator' | 'pup' | 'migrate') =>
      storeEnv('demo', spec.stores, who).find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef;
    expect(dbKey('orchestrator')).toEqual({ name: 'demo-postgres-app', key: 'orchestrator-uri' });
    expect(dbKey('pup')).toEqual({ name: 'demo-postgres-app', key: 'pup-uri' });
    expect(dbKey('migrate')).toEqual({ name: 'demo-postgres-app', key: 'owner-uri' });
    const job = migrationJob(owner, spec, 'holt:1');
    const env = (job.spec as { template: { spec: { containers: { env: { name: string }[] }[] } } }).template
      .spec.containers[0]!.env;
    expect(env.map((e) => e.name)).toEqual(
      expect.arrayContaining([
        'HOLT_DATABASE_OWNER_PASSWORD',
        'HOLT_DATABASE_ORCHESTRATOR_PASSWORD',
        'HOLT_DATABASE_PUP_PASSWORD',
        'HOLT_DATABASE_OPERATOR_PASSWORD',
      ]),
    );
  });

  it("an older operator's Secret (one runtime role, `app`) gains a role per component; what it had stays", () => {
    const have = {
      password: b64('old-superuser-pw'),
      'owner-password': b64('old-owner-pw'),
      'owner-uri': b64('postgresql://holt_owner:old-owner-pw@demo-postgres.team.svc:5432/holt'),
      'app-password': b64('old-app-pw'),
      'app-uri': b64('postgresql://holt_app:old-app-pw@demo-postgres.team.svc:5432/holt'),
    };
    const added = missingSecretKeys(owner, 'postgres', have, password);
    for (const k of Object.keys(have)) expect(added[k], k).toBeUndefined();
    for (const who of ['orchestrator', 'pup', 'operator']) {
      const pw = added[`${who}-password`] ?? '';
      expect(pw.length).toBeGreaterThanOrEqual(16);
      expect(added[`${who}-uri`]).toBe(`postgresql://holt_${who}:${pw}@demo-postgres.team.svc:5432/holt`);
    }
  });
});

describe('external stores: a user per component', () => {
  const ref = (name: string, key = 'url') => ({ name, key });
  const spec = HoltSpec.parse({
    stores: {
      redis: {
        mode: 'external',
        urlSecretRef: ref('redis-admin'),
        users: { orchestrator: { urlSecretRef: ref('redis-orch') }, pup: { urlSecretRef: ref('redis-pup') } },
      },
      nats: {
        mode: 'external',
        urlSecretRef: ref('nats-admin'),
        users: { pup: { urlSecretRef: ref('nats-pup') }, operator: { urlSecretRef: ref('nats-op') } },
      },
      postgres: {
        mode: 'external',
        secretName: 'pg-app',
        users: { orchestrator: { secretName: 'pg-orch' }, pup: { secretName: 'pg-pup' } },
      },
    },
  });
  const envOf = (who: 'orchestrator' | 'pup' | 'migrate') =>
    Object.fromEntries(
      storeEnv('demo', spec.stores, who).map((e) => [e.name, e.value ?? e.valueFrom?.secretKeyRef]),
    );

  it('each named component gets its own URL or role; one not named, the shared credential', () => {
    expect(envOf('orchestrator').REDIS_URL).toEqual(ref('redis-orch'));
    expect(envOf('pup').REDIS_URL).toEqual(ref('redis-pup'));
    expect(envOf('orchestrator').NATS_URL).toEqual(ref('nats-admin'));
    expect(envOf('pup').NATS_URL).toEqual(ref('nats-pup'));
    for (const [who, secret] of [
      ['orchestrator', 'pg-orch'],
      ['pup', 'pg-pup'],
    ] as const) {
      const env = envOf(who);
      // The server from the -app Secret, the credentials from the role's, outside the URL.
      expect(env.DATABASE_URL).toBe(
        'postgresql://$(HOLT_DATABASE_HOST):$(HOLT_DATABASE_PORT)/$(HOLT_DATABASE_NAME)',
      );
      expect(env.HOLT_DATABASE_HOST).toEqual({ name: 'pg-app', key: 'host' });
      expect(env.HOLT_DATABASE_NAME).toEqual({ name: 'pg-app', key: 'dbname' });
      expect(env.PGUSER).toEqual({ name: secret, key: 'username' });
      expect(env.PGPASSWORD).toEqual({ name: secret, key: 'password' });
    }
    // $(VAR) expands only variables defined before it in the list.
    const names = storeEnv('demo', spec.stores, 'pup').map((e) => e.name);
    expect(names.indexOf('HOLT_DATABASE_PORT')).toBeLessThan(names.indexOf('DATABASE_URL'));
  });

  it('the operator may read every Secret the users name (it reads only Secrets a Holt names)', () => {
    const withOperator = HoltSpec.parse({
      stores: {
        ...spec.stores,
        redis: { ...spec.stores.redis, users: { operator: { urlSecretRef: ref('redis-op') } } },
        postgres: { ...spec.stores.postgres, users: { operator: { secretName: 'pg-op' } } },
      },
    });
    const named = secretNamesIn(withOperator);
    for (const s of ['redis-op', 'nats-op', 'nats-pup', 'pg-op', 'pg-app'])
      expect(named.has(s), s).toBe(true);
  });

  it("the operator's own role: a URL whose user and password are escaped, at the -app Secret's server", () => {
    const url = externalRoleUrl(
      { username: 'holt_operator', password: 'p/w:@#?%' },
      { host: 'pg-rw.db.svc', port: '5432', dbname: 'app' },
    );
    expect(url).toBe('postgresql://holt_operator:p%2Fw%3A%40%23%3F%25@pg-rw.db.svc:5432/app');
    const u = new URL(url);
    expect(decodeURIComponent(u.password)).toBe('p/w:@#?%');
    expect(u.hostname).toBe('pg-rw.db.svc');
  });

  it("the migration runs as the -app Secret's user (the database's owner), which grants the roles", () => {
    expect(envOf('migrate')).toEqual({ DATABASE_URL: { name: 'pg-app', key: 'uri' } });
  });

  it('without users every component shares the one credential', () => {
    const shared = HoltSpec.parse({
      stores: {
        redis: { mode: 'external', urlSecretRef: ref('redis-admin') },
        nats: { mode: 'external', url: 'nats://nats.example:4222' },
        postgres: { mode: 'external', secretName: 'pg-app' },
      },
    });
    for (const who of ['orchestrator', 'pup'] as const) {
      const env = Object.fromEntries(
        storeEnv('demo', shared.stores, who).map((e) => [e.name, e.value ?? e.valueFrom?.secretKeyRef]),
      );
      expect(env).toEqual({
        REDIS_URL: ref('redis-admin'),
        NATS_URL: 'nats://nats.example:4222',
        DATABASE_URL: { name: 'pg-app', key: 'uri' },
      });
    }
  });

  it('users of a bundled store, or Postgres users without secretName, are refused', () => {
    expect(
      HoltSpec.safeParse({ stores: { redis: { users: { pup: { urlSecretRef: ref('r') } } } } }).success,
    ).toBe(false);
    const noSecret = {
      stores: {
        postgres: { mode: 'external', url: 'postgres://db/holt', users: { pup: { secretName: 'p' } } },
      },
    };
    expect(HoltSpec.safeParse(noSecret).success).toBe(false);
  });
});
