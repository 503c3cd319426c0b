import { existsSync } from 'node:fs';
import { type AddressInfo, createServer, type Server } from 'node:net';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type V1CustomResourceDefinition,
  type V1Deployment,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube } from './kube.ts';
import { freePort } from './ports.ts';
import { eventually } from './wait.ts';

const GROUP = 'test.holt.dev';
const VERSION = 'v1';
const PLURAL = 'widgets';

const widgetCrd: V1CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${PLURAL}.${GROUP}` },
  spec: {
    group: GROUP,
    scope: 'Namespaced',
    names: { plural: PLURAL, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [
      {
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: { type: 'object', properties: { size: { type: 'integer' }, colour: { type: 'string' } } },
              status: { type: 'object', properties: { phase: { type: 'string' } } },
            },
          },
        },
      },
    ],
  },
};

describe('kube harness: etcd + kube-apiserver', () => {
  let kube: KubeCluster;
  let held: Server;
  let picks = 0;
  beforeAll(async () => {
    // The apiserver's first port is one another process holds: it is started again on a new one.
    held = createServer();
    await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
    const heldPort = (held.address() as AddressInfo).port;
    kube = await startKube({ pickPort: () => (++picks === 1 ? Promise.resolve(heldPort) : freePort()) });
  });
  afterAll(async () => {
    await kube?.stop();
    held?.close();
  });

  it('an apiserver that lost its port to another process is started again on a new one', () => {
    expect(picks).toBe(2);
    expect(new URL(kube.server).port).not.toBe(String((held.address() as AddressInfo).port));
    expect(kube.procs.filter((p) => p.name === 'kube-apiserver')).toHaveLength(1);
  });

  it('serves a CRD and its custom objects to client-node and kubectl', async () => {
    const ext = kube.kubeconfig.makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({ body: widgetCrd });
    await eventually('the CRD to be Established', async () => {
      const crd = await ext.readCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
        ? crd
        : undefined;
    });

    const custom = kube.kubeconfig.makeApiClient(CustomObjectsApi);
    const body = {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'Widget',
      metadata: { name: 'w1' },
      spec: { size: 3, colour: 'teal' },
    };
    // Right after Established the new resource can take a moment to reach every handler.
    await eventually('the Widget to be created', () =>
      custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: 'default',
        plural: PLURAL,
        body,
      }),
    );
    const got = await custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: 'default',
      plural: PLURAL,
      name: 'w1',
    });
    expect(got.spec).toEqual({ size: 3, colour: 'teal' });
    expect(got.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);

    const list = JSON.parse(await kube.kubectl(['get', 'widgets', '-n', 'default', '-o', 'json'])) as {
      items: { metadata: { name: string }; spec: { size: number } }[];
    };
    expect(list.items.map((i) => [i.metadata.name, i.spec.size])).toEqual([['w1', 3]]);
  });

  it('kubectl apply from stdin, and a failing kubectl call reports its stderr', async () => {
    await kube.kubectl(['apply', '-f', '-'], {
      input: 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: holt-apply\n',
    });
    const ns = JSON.parse(await kube.kubectl(['get', 'namespace', 'holt-apply', '-o', 'json'])) as {
      status: { phase: string };
    };
    expect(ns.status.phase).toBe('Active');
    await expect(kube.kubectl(['get', 'namespace', 'does-not-exist'])).rejects.toThrow(/NotFound/);
    const r = await kube.kubectlResult(['get', 'namespace', 'does-not-exist'], { allowFail: true });
    expect(r.code).not.toBe(0);
  });

  it('the admin token is in system:masters and anonymous requests are forbidden', async () => {
    expect((await kube.kubectl(['auth', 'can-i', '*', '*'])).trim()).toBe('yes');
    const res = await fetch(`${kube.server}/api/v1/namespaces`).catch((e: unknown) => e);
    // Node's fetch does not trust the test CA: this only shows the server is TLS-only.
    expect(res).toBeInstanceOf(Error);
  });
});

describe('kube harness: with kube-controller-manager and kube-scheduler', () => {
  let kube: KubeCluster;
  beforeAll(async () => {
    kube = await startKube({ controllerManager: true, scheduler: true });
  });
  afterAll(async () => {
    await kube?.stop();
  });

  it('a Deployment gets a ReplicaSet and pods; deleting it garbage-collects them', async () => {
    const apps = kube.kubeconfig.makeApiClient(AppsV1Api);
    const core = kube.kubeconfig.makeApiClient(CoreV1Api);
    const labels = { app: 'hello' };
    const deployment: V1Deployment = {
      metadata: { name: 'hello' },
      spec: {
        replicas: 2,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'hello', image: 'example.invalid/hello:1' }] },
        },
      },
    };
    const created = await apps.createNamespacedDeployment({ namespace: 'default', body: deployment });

    const rs = await eventually('a ReplicaSet owned by the Deployment', async () => {
      const list = await apps.listNamespacedReplicaSet({ namespace: 'default' });
      return list.items.find((r) =>
        r.metadata?.ownerReferences?.some((o) => o.uid === created.metadata?.uid),
      );
    });
    expect(rs.spec?.replicas).toBe(2);

    // Pods need the namespace's `default` ServiceAccount (serviceaccount-controller) to pass admission.
    const pods = await eventually('two pods of the ReplicaSet', async () => {
      const list = await core.listNamespacedPod({ namespace: 'default', labelSelector: 'app=hello' });
      return list.items.length === 2 ? list.items : undefined;
    });
    expect(pods.every((p) => p.spec?.serviceAccountName === 'default')).toBe(true);

    await apps.deleteNamespacedDeployment({ name: 'hello', namespace: 'default' });
    await eventually('the garbage collector to delete the ReplicaSet', async () => {
      const list = await apps.listNamespacedReplicaSet({ namespace: 'default' });
      return list.items.length === 0 ? true : undefined;
    });
  });

  it('stop() ends every process and removes the temp dir', async () => {
    const procs = [...kube.procs];
    expect(procs.map((p) => p.name)).toEqual([
      'etcd',
      'kube-apiserver',
      'kube-controller-manager',
      'kube-scheduler',
    ]);
    const t0 = Date.now();
    await kube.stop();
    expect(Date.now() - t0).toBeLessThan(30_000);
    for (const p of procs) expect(p.child.exitCode !== null || p.child.signalCode !== null).toBe(true);
    expect(existsSync(kube.dir)).toBe(false);
  });
});
