import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeCluster } from '../../../test/harness/kube.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { type KubeClient, type KubeObject, refOf } from '../kube/kube.ts';
import type { Operator } from '../operator.ts';
import { storeName } from '../specs/stores.ts';
import { holtObject, startKubeWithCrds, startOperator } from '../testkit.ts';

// A StatefulSet's claim templates are immutable: a bundled store's bigger `storage` is carried out by
// resizing its PVC and re-creating the StatefulSet around the running pod, not a 422 forever; a
// smaller size is refused in the Holt's status, without holding up the rest of the StatefulSet.
const NS = 'holt-storage';
const HOLT = 'hs';
const STS = storeName(HOLT, 'redis');
const PVC = `data-${STS}-0`;
let kube: KubeCluster;
let admin: KubeClient;
let op: Operator;

const storageOf = (o: KubeObject | undefined) =>
  (o?.spec as { resources?: { requests?: { storage?: string } } } | undefined)?.resources?.requests?.storage;
const templateStorage = (sts: KubeObject | undefined) =>
  storageOf(
    (sts?.spec as { volumeClaimTemplates?: KubeObject[] } | undefined)?.volumeClaimTemplates?.[0] as
      | KubeObject
      | undefined,
  );
type Cond = { type: string; status: string; message: string };
const cond = (o: KubeObject | undefined, type: string) =>
  ((o?.status ?? {}) as { conditions?: Cond[] }).conditions?.find((c) => c.type === type);
const imageOf = (sts: KubeObject | undefined) =>
  (sts?.spec as { template?: { spec?: { containers?: { image?: string }[] } } } | undefined)?.template?.spec
    ?.containers?.[0]?.image;
const patchRedis = (redis: Record<string, unknown>) =>
  admin.mergePatch('Holt', NS, HOLT, { spec: { stores: { redis } } }, 'test');
const eventsOf = async (reason: string) =>
  (await admin.list('Event', NS)).items.filter((e) => e.reason === reason);

beforeAll(async () => {
  ({ kube, admin } = await startKubeWithCrds(NS, { controllerManager: true }));
  // A class that allows expansion, and a volume of it for the Redis PVC (no provisioner or volume
  // binder runs here: fakeBind below does the binder's part).
  // Kinds the operator itself never touches (the client finds them by discovery).
  await admin.create({
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: 'growable' },
    provisioner: 'holt.test/none',
    allowVolumeExpansion: true,
  });
  await admin.create({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'pv-redis' },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      storageClassName: 'growable',
      hostPath: { path: '/tmp/holt-storage-test' },
    },
  });
  op = await startOperator(kube, NS);
  await admin.create(
    holtObject(NS, HOLT, { stores: { redis: { storage: '1Gi', storageClassName: 'growable' } } }),
  );
}, 120_000);

afterAll(async () => {
  await op?.stop();
  admin?.close();
  await kube?.stop();
});

/** The volume binder's part, which the test cluster does not run: binds the claim to the volume. */
async function fakeBind(claim: KubeObject, volume: string): Promise<void> {
  const ns = claim.metadata.namespace as string;
  const pv = { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: volume } };
  await admin.patch(pv, {
    spec: {
      claimRef: {
        kind: 'PersistentVolumeClaim',
        namespace: ns,
        name: claim.metadata.name,
        uid: claim.metadata.uid,
      },
    },
  });
  await admin.patch(pv, { status: { phase: 'Bound' } }, { subresource: 'status' });
  await admin.mergePatch('PersistentVolumeClaim', ns, claim.metadata.name, { spec: { volumeName: volume } });
  await admin.patch(
    refOf('PersistentVolumeClaim', ns, claim.metadata.name),
    { status: { phase: 'Bound', accessModes: ['ReadWriteOnce'], capacity: { storage: '1Gi' } } },
    { subresource: 'status' },
  );
}

describe('a bundled store whose storage changes (real API server + controller-manager)', () => {
  let stsUid: string | undefined;
  let podUid: string | undefined;

  it('the Redis PVC is made from the StatefulSet, at 1Gi', async () => {
    const pvc = await eventually('the PVC', () => admin.get('PersistentVolumeClaim', NS, PVC), {
      timeoutMs: 60_000,
    });
    expect(storageOf(pvc)).toBe('1Gi');
    await fakeBind(pvc, 'pv-redis');
    stsUid = (await admin.get('StatefulSet', NS, STS))?.metadata.uid;
    podUid = (await eventually('the pod', () => admin.get('Pod', NS, `${STS}-0`))).metadata.uid;
  });

  it('a size that is not a quantity is refused by the API server', async () => {
    await expect(patchRedis({ storage: '2GB' })).rejects.toThrow('storage must be a quantity');
  });

  it('a smaller size is refused in the Holt status, the rest still applies, and going back clears it', async () => {
    await patchRedis({ storage: '512Mi', image: 'redis:7.4-alpine' });
    const degraded = await eventually('the Holt Degraded, saying why', async () => {
      const c = cond(await admin.get('Holt', NS, HOLT), 'Degraded');
      return c?.status === 'True' && c.message.includes('storage cannot shrink (1Gi → 512Mi)')
        ? c
        : undefined;
    });
    expect(degraded.message).toContain(`StatefulSet/${STS}`);
    // Not held up by it: the new image is applied, to the same StatefulSet, its claim template as it was.
    const sts = await eventually('the new image applied', async () => {
      const s = await admin.get('StatefulSet', NS, STS);
      return imageOf(s) === 'redis:7.4-alpine' ? s : undefined;
    });
    expect(sts.metadata.uid).toBe(stsUid);
    expect(templateStorage(sts)).toBe('1Gi');
    await patchRedis({ storage: '1Gi' });
    await eventually('no longer Degraded', async () => {
      return cond(await admin.get('Holt', NS, HOLT), 'Degraded')?.status === 'False';
    });
  });

  it('a bigger size: the PVC resized, the StatefulSet re-created around the same pod', async () => {
    // The pod as the image change above left it (the StatefulSet controller replaced it).
    const before = await eventually('the pod on the new image', async () => {
      const p = await admin.get('Pod', NS, `${STS}-0`);
      const image = (p?.spec as { containers?: { image?: string }[] } | undefined)?.containers?.[0]?.image;
      return image === 'redis:7.4-alpine' && !p?.metadata.deletionTimestamp ? p : undefined;
    });
    podUid = before.metadata.uid;
    await patchRedis({ storage: '2Gi' });
    await eventually(
      'the PVC asks for 2Gi',
      async () => storageOf(await admin.get('PersistentVolumeClaim', NS, PVC)) === '2Gi',
    );
    const sts = await eventually(
      'a new StatefulSet with a 2Gi template',
      async () => {
        const s = await admin.get('StatefulSet', NS, STS);
        return s && s.metadata.uid !== stsUid && templateStorage(s) === '2Gi' ? s : undefined;
      },
      { timeoutMs: 60_000 },
    );
    // The pod was orphaned and adopted, not deleted: same uid, now owned by the new StatefulSet.
    const pod = await eventually(
      'the pod adopted',
      async () => {
        const p = await admin.get('Pod', NS, `${STS}-0`);
        return p?.metadata.ownerReferences?.some((r) => r.uid === sts.metadata.uid) ? p : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(pod.metadata.uid).toBe(podUid);
    const [e] = await eventually('a StorageGrown event', async () => {
      const l = await eventsOf('StorageGrown');
      return l.length ? l : undefined;
    });
    expect(String(e?.note)).toContain(`StatefulSet/${STS}: storage data 1Gi → 2Gi`);
    // Never a failed apply on the way (without this: 422, the claim templates are immutable).
    expect((await eventsOf('ApplyFailed')).filter((x) => String(x.note).includes('2Gi'))).toEqual([]);
  });

  it('a PVC that cannot grow (unbound, no expandable class): reported, nothing re-created, going back clears it', async () => {
    const nats = storeName(HOLT, 'nats');
    const uid = (await eventually('the NATS StatefulSet', () => admin.get('StatefulSet', NS, nats))).metadata
      .uid;
    await eventually('the NATS PVC', () => admin.get('PersistentVolumeClaim', NS, `data-${nats}-0`));
    await admin.mergePatch('Holt', NS, HOLT, { spec: { stores: { nats: { storage: '2Gi' } } } }, 'test');
    await eventually('the Holt Degraded, saying why', async () => {
      const c = cond(await admin.get('Holt', NS, HOLT), 'Degraded');
      return c?.status === 'True' && c.message.includes(`StatefulSet/${nats}: storage not grown`);
    });
    expect((await admin.get('StatefulSet', NS, nats))?.metadata.uid).toBe(uid);
    await admin.mergePatch('Holt', NS, HOLT, { spec: { stores: { nats: { storage: '1Gi' } } } }, 'test');
    await eventually('no longer Degraded', async () => {
      return cond(await admin.get('Holt', NS, HOLT), 'Degraded')?.status === 'False';
    });
  });
});
