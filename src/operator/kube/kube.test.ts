import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeCluster } from '../../../test/harness/kube.ts';
import { startKubeWithCrds } from '../testkit.ts';
import { ApiError, KubeClient, type KubeObject, refOf } from './kube.ts';

const NS = 'client';
let kube: KubeCluster;
let client: KubeClient;

beforeAll(async () => {
  ({ kube, admin: client } = await startKubeWithCrds(NS));
}, 120_000);
afterAll(async () => {
  client?.close();
  await kube?.stop();
});

describe('the operator client (client-node KubernetesObjectApi) on a real API server', () => {
  it('sends bodies as built: a NetworkPolicy rule keeps its `from` (client-node models call it _from)', async () => {
    const rule = { from: [{ namespaceSelector: { matchLabels: { team: 'a' } } }], ports: [{ port: 6379 }] };
    const np = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'np', namespace: NS },
      spec: { podSelector: {}, ingress: [rule], policyTypes: ['Ingress'] },
    };
    await client.apply(np, { fieldManager: 'test' });
    const got = await client.get('NetworkPolicy', NS, 'np');
    expect((got?.spec as { ingress?: unknown[] } | undefined)?.ingress).toEqual([
      { ...rule, ports: [{ port: 6379, protocol: 'TCP' }] },
    ]);
  });

  it('replies stay API JSON: timestamps are strings, list items carry apiVersion and kind', async () => {
    const created = await client.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cm', namespace: NS },
      data: { a: '1' },
    } as KubeObject);
    expect(typeof created.metadata.creationTimestamp).toBe('string');
    const list = await client.list('Secret', NS);
    expect(list.kind).toBe('SecretList');
    expect(typeof list.metadata.resourceVersion).toBe('string');
  });

  it('counts every request by verb, writes apart; a missing object is undefined, a conflict an ApiError', async () => {
    const before = { writes: client.writes(), total: client.total() };
    expect(await client.get('Secret', NS, 'nope')).toBeUndefined();
    const s = await client.create<KubeObject>({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: NS },
      stringData: { k: 'v' },
    });
    await client.mergePatch('Secret', NS, 's', { metadata: { labels: { patched: 'yes' } } });
    const conflict = await client
      .update(s) // the resourceVersion from before the patch
      .catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(ApiError);
    expect(conflict).toMatchObject({ status: 409, reason: 'Conflict' });
    await client.delete('Secret', NS, 's');
    await client.delete('Secret', NS, 's'); // already gone: success
    expect(client.writes() - before.writes).toBe(5);
    expect(client.total() - before.total).toBe(6);
    expect(client.inFlight).toBe(0);
  });

  it('patches a subresource: status by merge patch and by server-side apply', async () => {
    const holt = { apiVersion: 'holt.io/v1alpha1', kind: 'Holt', metadata: { name: 'h', namespace: NS } };
    await client.create({ ...holt, spec: {} });
    await client.patch(refOf('Holt', NS, 'h'), { status: { phase: 'Pending' } }, { subresource: 'status' });
    expect((await client.get('Holt', NS, 'h'))?.status).toMatchObject({ phase: 'Pending' });
    const applied = await client.apply(
      { ...holt, status: { observedGeneration: 1 } },
      { fieldManager: 'test', force: true, subresource: 'status' },
    );
    expect(applied.status).toMatchObject({ observedGeneration: 1 });
    // Written through /status: the spec's generation did not move.
    expect((await client.get('Holt', NS, 'h'))?.metadata.generation).toBe(1);
  });

  it('a call to an API server that never answers ends when its signal aborts', async () => {
    // A server that accepts the request and never replies (a hung API server).
    const held: ServerResponse[] = [];
    const hung = createServer((_req, res) => held.push(res));
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: 'hung',
          server: `http://127.0.0.1:${(hung.address() as AddressInfo).port}`,
          skipTLSVerify: true,
        },
      ],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'c', cluster: 'hung', user: 'u' }],
      currentContext: 'c',
    });
    const stuck = new KubeClient(kc);
    try {
      const call = stuck.get('Secret', NS, 'x', { signal: AbortSignal.timeout(300) });
      await expect(call).rejects.toThrow(/abort|timeout/i);
      expect(held).toHaveLength(1); // the request did reach the server
      expect(stuck.inFlight).toBe(0);
      expect(stuck.total()).toBe(1);
    } finally {
      stuck.close();
      for (const r of held) r.destroy();
      hung.close();
    }
  });

  it('kinds the operator never touches are found by discovery', async () => {
    const sc = await client.create({
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: 'found' },
      provisioner: 'holt.test/none',
    } as KubeObject);
    expect(sc.metadata.uid).toBeTruthy();
    await client.patch(
      { apiVersion: 'storage.k8s.io/v1', kind: 'StorageClass', metadata: { name: 'found' } },
      {
        metadata: { labels: { seen: 'yes' } },
      },
    );
  });
});
