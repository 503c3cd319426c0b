import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import { parseAgent } from '../controllers/resources.ts';
import { agentDeployment } from '../specs/agent.ts';
import { bundledStore } from '../specs/bundled.ts';
import { ownerOf } from '../specs/meta.ts';
import { replaceReason } from './apply.ts';
import type { KubeObject } from './kube.ts';

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
