import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import { parseAgent } from '../controllers/resources.ts';
import { agentDeployment } from '../specs/agent.ts';
import { bundledStore } from '../specs/bundled.ts';
import { ownerOf } from '../specs/meta.ts';
import { replaceReason, storageChange, withClaimTemplatesOf } from './immutable.ts';
import type { KubeObject } from './kube.ts';
import { quantityValue } from './quantity.ts';

const agent: KubeObject = {
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Agent',
  metadata: { name: 'flip', namespace: 'ns', uid: 'a1' },
};
const holtSpec = HoltSpec.parse({});
/** The agent's pup Deployment for a spec (what the controller builds). */
function pup(spec: Record<string, unknown>, owner = agent): KubeObject {
  const parsed = parseAgent({
    ...owner,
    spec: { holt: 'h', command: ['/bin/true'], bidding: { strategy: 'claim' }, ...spec },
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return agentDeployment(ownerOf(owner), parsed.spec, holtSpec, 'runtime:1');
}
/** As the API server returns it: its own fields added, ours kept. */
const live = (o: KubeObject): KubeObject => ({
  ...o,
  metadata: { ...o.metadata, uid: 'd1', resourceVersion: '7' },
  status: { replicas: 1 },
});

describe('replaceReason: when a child must be deleted and re-created instead of applied', () => {
  const reuse = pup({ strategy: 'reuse', replicas: 1 });
  const fresh = pup({ strategy: 'fresh_per_call', replicas: 1 });
  const pool = pup({ strategy: 'reuse', replicas: 3 });

  it('a strategy or shape switch that moves the pup selector → replace, saying old → new', () => {
    expect(replaceReason(fresh, live(reuse))).toBe(
      'spec.selector changed (app.kubernetes.io/component=agent,app.kubernetes.io/instance=flip → ' +
        'app.kubernetes.io/component=controller,app.kubernetes.io/instance=flip)',
    );
    expect(replaceReason(reuse, live(fresh))).toContain('spec.selector changed');
    expect(replaceReason(pool, live(reuse))).toContain('spec.selector changed');
  });

  it('same selector (other fields may differ) → apply as usual; nothing live → create', () => {
    expect(replaceReason(reuse, live(reuse))).toBeUndefined();
    // fresh_per_call and a pool both run a controller pup: same selector, a plain apply.
    expect(replaceReason(pool, live(fresh))).toBeUndefined();
    expect(replaceReason(reuse, live(pup({ strategy: 'reuse', replicas: 1, image: 'x:2' })))).toBeUndefined();
    expect(replaceReason(fresh, undefined)).toBeUndefined();
  });

  it('never replaces a StatefulSet or an object another owner controls', () => {
    const owner = ownerOf({ ...agent, kind: 'Holt', metadata: { name: 'h', namespace: 'ns', uid: 'h1' } });
    const [sts] = bundledStore(owner, 'redis', holtSpec.stores.redis);
    const moved = { ...sts, spec: { ...(sts?.spec as object), selector: { matchLabels: { x: 'y' } } } };
    expect(replaceReason(sts as KubeObject, live(moved as KubeObject))).toBeUndefined();
    const foreign = pup(
      { strategy: 'reuse', replicas: 1 },
      { ...agent, metadata: { ...agent.metadata, uid: 'a2' } },
    );
    expect(replaceReason(fresh, live(foreign))).toBeUndefined();
  });
});

describe('storageChange: a bundled store whose PVC size or class changed', () => {
  const owner = ownerOf({ ...agent, kind: 'Holt', metadata: { name: 'h', namespace: 'ns', uid: 'h1' } });
  const store = (over: Record<string, unknown>) =>
    bundledStore(owner, 'redis', { ...holtSpec.stores.redis, ...over })[0] as KubeObject;
  const at1 = live(store({ storage: '1Gi' }));

  it('a bigger size → grow, from and to', () => {
    expect(storageChange(store({ storage: '2Gi' }), at1)).toEqual({
      grow: [{ template: 'data', from: '1Gi', to: '2Gi' }],
    });
    expect(storageChange(store({ storage: '1500M' }), at1)).toMatchObject({ grow: [{ to: '1500M' }] });
  });

  it('the same size (however written) or nothing live → nothing to do', () => {
    expect(storageChange(store({ storage: '1Gi' }), at1)).toBeUndefined();
    expect(storageChange(store({ storage: '1024Mi' }), at1)).toBeUndefined();
    expect(storageChange(store({ storage: '2Gi' }), undefined)).toBeUndefined();
  });

  it('smaller, another class or not a quantity → refused with why', () => {
    expect(storageChange(store({ storage: '512Mi' }), at1)).toEqual({
      refused: 'volume data: storage cannot shrink (1Gi → 512Mi); PVCs only grow',
    });
    expect(storageChange(store({ storageClassName: 'fast' }), at1)).toEqual({
      refused: 'volume data: storageClassName cannot change (default → fast)',
    });
    expect(storageChange(store({ storage: '2GB' }), at1)).toMatchObject({
      refused: expect.stringContaining('not a quantity'),
    });
  });

  it('what cannot change is applied as live has it, the rest as desired', () => {
    const want = store({ storage: '512Mi', storageClassName: 'fast', image: 'redis:8' });
    const kept = withClaimTemplatesOf(want, at1);
    const spec = kept.spec as { volumeClaimTemplates: { spec: Record<string, unknown> }[] };
    expect(spec.volumeClaimTemplates[0]?.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '1Gi' } },
    });
    expect(JSON.stringify(kept.spec)).toContain('redis:8');
    expect(storageChange(kept, at1)).toBeUndefined();
  });

  it('only our own StatefulSets', () => {
    const foreign = live({ ...at1, metadata: { ...at1.metadata, ownerReferences: [] } });
    expect(storageChange(store({ storage: '2Gi' }), foreign)).toBeUndefined();
    expect(storageChange(pup({ strategy: 'reuse' }), live(pup({ strategy: 'reuse' })))).toBeUndefined();
  });

  it('quantities, exactly: the canonical form the API server stores compares equal to what was written', () => {
    const v = (q: string) => {
      const { num, den } = quantityValue(q);
      return Number(num) / Number(den);
    };
    expect(v('1Gi')).toBe(2 ** 30);
    expect(v('1.5G')).toBe(1.5e9);
    expect(v('1e3')).toBe(1000);
    expect(v('100m')).toBe(0.1);
    expect(v('.5Ki')).toBe(512);
    expect(() => quantityValue('1GB')).toThrow('not a quantity');
    expect(() => quantityValue('Gi')).toThrow('not a quantity');
    // 0.7Gi is stored as 751619276800m: the same size, not a smaller one.
    const at = live(store({ storage: '751619276800m' }));
    expect(storageChange(store({ storage: '0.7Gi' }), at)).toBeUndefined();
    for (const [written, stored] of [
      ['1.4Gi', '1503238553600m'],
      ['2.3Gi', '2469606195200m'],
      ['3.3Gi', '3543348019200m'],
    ] as const)
      expect(storageChange(store({ storage: written }), live(store({ storage: stored })))).toBeUndefined();
  });
});
