import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube } from '../../../test/harness/kube.ts';
import { HoltSpec } from '../../api/holt.ts';
import { KubeClient, type KubeObject } from '../kube/kube.ts';
import { informedContext } from '../testkit.ts';
import type { ControllerContext } from './context.ts';
import {
  holtClaims,
  lostVolumes,
  lostVolumesMessage,
  nodeDown,
  OUT_OF_SERVICE_TAINT,
  readLostVolumes,
  volumeNodes,
} from './lostvolumes.ts';

/** A PV as local-path-provisioner writes it: a local directory pinned to one host. */
const localPv = (name: string, node: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name },
  spec: {
    hostPath: { path: `/var/local/${name}` },
    nodeAffinity: {
      required: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node] }] },
        ],
      },
    },
  },
});
/** A shared file system's PV (the `shared` class): no node affinity, every node mounts it. */
const sharedPv = (name: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name },
  spec: { hostPath: { path: `/shared/${name}` } },
});
const node = (
  name: string,
  ready: 'True' | 'False' | 'Unknown',
  taints: { key: string }[] = [],
): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name },
  spec: { taints },
  status: { conditions: [{ type: 'Ready', status: ready, lastTransitionTime: '2026-11-26T17:00:00Z' }] },
});

describe('a volume lost with its node', () => {
  it('volumeNodes: a host-pinned PV names its node; a shared, zonal or unpinned one names none', () => {
    expect(volumeNodes(localPv('pv-a', 'n1'))).toEqual(['n1']);
    expect(volumeNodes(sharedPv('pv-b'))).toBeUndefined();
    expect(volumeNodes(undefined)).toBeUndefined();
    const zonal: KubeObject = {
      ...localPv('pv-z', 'n1'),
      spec: {
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['z1'] }] },
            ],
          },
        },
      },
    };
    expect(volumeNodes(zonal)).toBeUndefined();
    // Terms are ORed: one term that is not a host pin frees the volume.
    const either: KubeObject = {
      ...zonal,
      spec: {
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['n1'] }] },
              { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['z1'] }] },
            ],
          },
        },
      },
    };
    expect(volumeNodes(either)).toBeUndefined();
    const notIn: KubeObject = {
      ...zonal,
      spec: {
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'NotIn', values: ['n1'] }] },
            ],
          },
        },
      },
    };
    expect(volumeNodes(notIn)).toBeUndefined();
  });

  it('nodeDown: Ready and joining nodes are up; NotReady, unreachable and absent ones are down', () => {
    expect(nodeDown(node('n1', 'True'))).toBeUndefined();
    expect(nodeDown({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } })).toBeUndefined();
    expect(nodeDown(node('n1', 'Unknown'))).toBe('is unreachable since 2026-11-26T17:00:00Z');
    expect(nodeDown(node('n1', 'False'))).toMatch(/^is NotReady since/);
    expect(nodeDown(node('n1', 'Unknown', [{ key: OUT_OF_SERVICE_TAINT }]))).toMatch(/out-of-service/);
    expect(nodeDown(null)).toBe('is gone (no such Node)');
  });

  it('lostVolumes: only node-bound volumes whose node is down; shared ones and unknown nodes never', () => {
    const claims = [
      { claim: 'data-h-redis-0', pv: localPv('pv-1', 'n1') },
      { claim: 'data-h-nats-0', pv: localPv('pv-2', 'n2') },
      { claim: 'h-workspace', pv: sharedPv('pv-3') },
      { claim: 'data-h-postgres-0', pv: localPv('pv-4', 'n3') },
    ];
    const nodes = new Map([
      ['n1', node('n1', 'Unknown')],
      ['n2', node('n2', 'True')],
    ]);
    // n3 was not read (unknown): nothing is claimed about it.
    expect(lostVolumes(claims, nodes)).toEqual([
      { claim: 'data-h-redis-0', node: 'n1', why: 'is unreachable since 2026-11-26T17:00:00Z' },
    ]);
    expect(lostVolumes(claims, new Map([['n1', node('n1', 'True')]]))).toEqual([]);
    expect(lostVolumes(claims, new Map([['n3', null]]))).toEqual([
      { claim: 'data-h-postgres-0', node: 'n3', why: 'is gone (no such Node)' },
    ]);
  });

  it('the message names each PVC and its node', () => {
    const msg = lostVolumesMessage([
      { claim: 'data-h-redis-0', node: 'n1', why: 'is unreachable' },
      { claim: 'h-workspace', node: 'n1', why: 'is unreachable' },
    ]);
    expect(msg).toContain('PVC data-h-redis-0 on node n1, which is unreachable');
    expect(msg).toContain('PVC h-workspace on node n1');
    expect(lostVolumesMessage([])).toBe('');
  });

  it("holtClaims: the bundled stores' data claims and the workspace, not an external store's", () => {
    const spec = HoltSpec.parse({ stores: { nats: { mode: 'external', url: 'nats://x:4222' } } });
    expect(holtClaims('h', spec)).toEqual(['data-h-redis-0', 'data-h-postgres-0', 'h-workspace']);
  });
});

/** On a real API server: the PVCs through an informer, the PVs and Nodes read by name as the chart allows. */
describe('readLostVolumes on a real API server', () => {
  let kube: KubeCluster;
  let client: KubeClient;
  let stopInformer: (() => Promise<void>) | undefined;
  const NS = 'lost';
  const spec = HoltSpec.parse({});
  let ctx: ControllerContext;

  beforeAll(async () => {
    kube = await startKube();
    client = new KubeClient(kube.kubeconfig);
    await kube.kubectl(['create', 'namespace', NS]);
    const pv = (name: string, node?: string) => ({
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        hostPath: { path: `/tmp/${name}` },
        ...(node
          ? { nodeAffinity: (localPv(name, node).spec as { nodeAffinity: unknown }).nodeAffinity }
          : {}),
      },
    });
    const pvc = (name: string, volumeName: string) => ({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name, namespace: NS },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName: '',
        volumeName,
        resources: { requests: { storage: '1Gi' } },
      },
    });
    const objs = [
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } },
      pv('pv-redis', 'n1'),
      pv('pv-workspace'),
      pvc('data-h-redis-0', 'pv-redis'),
      pvc('h-workspace', 'pv-workspace'),
    ];
    await kube.kubectl(['apply', '-f', '-'], { input: objs.map((o) => JSON.stringify(o)).join('\n') });
    ({ ctx, stop: stopInformer } = await informedContext(client, 'PersistentVolumeClaim', NS));
  }, 120_000);
  afterAll(async () => {
    await stopInformer?.();
    client?.close();
    await kube?.stop();
  });

  const setReady = (status: string) =>
    kube.kubectl([
      'patch',
      'node',
      'n1',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({
        status: {
          conditions: [
            {
              type: 'Ready',
              status,
              reason: 'Test',
              lastHeartbeatTime: null,
              lastTransitionTime: '2026-11-26T17:00:00Z',
            },
          ],
        },
      }),
    ]);

  it('a Ready node loses nothing; unreachable, it names the PVC and node; a shared volume never', async () => {
    await setReady('True');
    expect(await readLostVolumes(ctx, NS, 'h', spec)).toEqual([]);
    await setReady('Unknown');
    expect(await readLostVolumes(ctx, NS, 'h', spec)).toEqual([
      { claim: 'data-h-redis-0', node: 'n1', why: 'is unreachable since 2026-11-26T17:00:00Z' },
    ]);
    await kube.kubectl(['delete', 'node', 'n1']);
    expect(await readLostVolumes(ctx, NS, 'h', spec)).toEqual([
      { claim: 'data-h-redis-0', node: 'n1', why: 'is gone (no such Node)' },
    ]);
  });
});
