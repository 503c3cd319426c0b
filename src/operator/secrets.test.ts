import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube } from '../../test/harness/kube.ts';
import { eventually } from '../../test/harness/wait.ts';
import { KubeClient, type KubeObject } from './kube/kube.ts';
import type { Operator } from './operator.ts';
import { namedSecrets, secretNamesIn } from './secrets.ts';
import { installCrds, startOperator } from './testkit.ts';

const NS = 'secrets-test';
let kube: KubeCluster;
let admin: KubeClient;
let op: Operator;

const secret = (name: string, data: Record<string, string>): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace: NS },
  stringData: data,
});
const obj = (kind: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'holt.io/v1alpha1',
  kind,
  metadata: { name, namespace: NS },
  spec,
});
const HOLT = obj('Holt', 'ext', {
  stores: { redis: { mode: 'external', urlSecretRef: { name: 'ext-redis-url', key: 'url' } } },
  llm: { model: 'm', apiKeySecretRef: { name: 'llm-key', key: 'key' } },
});
const AGENT = obj('Agent', 'ext-writer', {
  holt: 'ext',
  role: 'Writer',
  llm: {},
  bidding: { strategy: 'exclusive' },
  ingress: { enabled: true, tokens: [{ name: 'ci' }, { name: 'byo', secretName: 'my-token' }] },
});

beforeAll(async () => {
  kube = await startKube();
  admin = new KubeClient(kube.kubeconfig);
  await installCrds(admin);
  await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  for (const [name, key] of [
    ['bank', 'password'],
    ['ext-redis-url', 'url'],
    ['llm-key', 'key'],
    ['my-token', 'token'],
  ] as const)
    await admin.create(secret(name, { [key]: `${name}-value` }));
  await admin.create(HOLT);
  await admin.create(AGENT);
  op = await startOperator(kube, NS);
}, 120_000);

afterAll(async () => {
  await op?.stop();
  admin?.close();
  await kube?.stop();
});

describe('the Secrets the operator reads', () => {
  it('are those a spec names, under any secretName / …SecretRef key, and those it makes', () => {
    expect([...secretNamesIn(HOLT.spec)].sort()).toEqual(['ext-redis-url', 'llm-key']);
    expect([...namedSecrets([HOLT], [AGENT])].sort()).toEqual([
      'ext-ingress-tokens',
      'ext-nats',
      'ext-postgres-app',
      'ext-redis',
      'ext-redis-url',
      'ext-writer-ingress-ci',
      'llm-key',
      'my-token',
    ]);
  });

  it('on a real API server: a Secret no Holt or Agent names is refused before any request; a named one is read', async () => {
    const client = op.ctx.client;
    await eventually('the Holt and Agent cached', () =>
      op.cache.get('Holt', NS, 'ext') && op.cache.get('Agent', NS, 'ext-writer') ? true : undefined,
    );
    const before = client.total();
    await expect(client.get('Secret', NS, 'bank')).rejects.toThrow(
      `Secret read refused: no Holt or Agent in ${NS} names Secret bank`,
    );
    await expect(client.list('Secret', NS)).rejects.toThrow(/never listed/);
    expect(client.total()).toBe(before);
    // What the Holt and the Agent name, and what the operator made for them, it reads.
    for (const name of ['ext-redis-url', 'llm-key', 'my-token'])
      expect((await client.get('Secret', NS, name))?.metadata.name).toBe(name);
    const made = await eventually('the store Secret made', () => client.get('Secret', NS, 'ext-nats'));
    expect(made.metadata.name).toBe('ext-nats');
    // A Secret stops being readable when the last spec naming it goes.
    await admin.delete('Agent', NS, 'ext-writer');
    await eventually('the Agent gone from the cache', () =>
      op.cache.get('Agent', NS, 'ext-writer') ? undefined : true,
    );
    await expect(client.get('Secret', NS, 'my-token')).rejects.toThrow(/names Secret my-token/);
  });
});
