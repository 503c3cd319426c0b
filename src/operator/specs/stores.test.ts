import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import { bundledStore } from './bundled.ts';
import { storeEnv, storeTlsClient } from './stores.ts';

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
