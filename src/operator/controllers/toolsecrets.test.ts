import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube } from '../../../test/harness/kube.ts';
import { HoltSpec } from '../../api/holt.ts';
import { KubeClient } from '../kube/kube.ts';
import type { Owner } from '../specs/meta.ts';
import { passwordKey, storeSecretName } from '../specs/stores.ts';
import { informedContext } from '../testkit.ts';
import type { ControllerContext } from './context.ts';
import { pruneToolSecrets, syncToolSecrets } from './toolsecrets.ts';

/** On a real API server: the tool Secrets a Holt's bundled NATS reads, made and pruned. */
describe('tool Secrets', () => {
  let kube: KubeCluster;
  let client: KubeClient;
  let stopInformer: (() => Promise<void>) | undefined;
  let ctx: ControllerContext;
  const NS = 'tools';
  const owner: Owner = { apiVersion: 'holt.io/v1alpha1', kind: 'Holt', name: 'h', namespace: NS, uid: 'u-1' };
  const spec = HoltSpec.parse({});

  beforeAll(async () => {
    kube = await startKube();
    client = new KubeClient(kube.kubeconfig);
    await kube.kubectl(['create', 'namespace', NS]);
    await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: storeSecretName('h', 'nats'), namespace: NS },
      stringData: { [passwordKey('tool')]: 'a-tool-password-of-some-length' },
    });
    ({ ctx, stop: stopInformer } = await informedContext(client, 'StatefulSet', NS));
  }, 120_000);
  afterAll(async () => {
    await stopInformer?.();
    client?.close();
    await kube?.stop();
  });

  it('a dropped tool loses its Secret even when the cached NATS StatefulSet never showed that tool', async () => {
    // A pass makes both Secrets; the StatefulSet that reads them is not in the cache yet (the informer
    // lags under load, or the pass that would have pruned failed on another child).
    const first = await syncToolSecrets(ctx, owner, spec, ['lookup', 'deploy']);
    expect(first.created).toEqual(['Secret/h-tool-lookup', 'Secret/h-tool-deploy']);
    // The next pass drops `deploy`: what it prunes cannot come from the StatefulSet alone.
    const next = await syncToolSecrets(ctx, owner, spec, ['lookup']);
    expect(next.had).toEqual(['h-tool-deploy', 'h-tool-lookup']);
    expect(await pruneToolSecrets(ctx, owner, next.had, ['lookup'])).toEqual(['Secret/h-tool-deploy']);
    expect(await client.get('Secret', NS, 'h-tool-deploy')).toBeUndefined();
    expect(await client.get('Secret', NS, 'h-tool-lookup')).toBeDefined();
    // Pruned once: the pass after has nothing more to delete.
    const after = await syncToolSecrets(ctx, owner, spec, ['lookup']);
    expect(after.had).toEqual(['h-tool-lookup']);
  });
});
