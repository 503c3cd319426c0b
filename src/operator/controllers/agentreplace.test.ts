import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeCluster } from '../../../test/harness/kube.ts';
import { eventually } from '../../../test/harness/wait.ts';
import type { KubeClient, KubeObject } from '../kube/kube.ts';
import type { Operator } from '../operator.ts';
import { agentObject, fakeKubelet, holtObject, startKubeWithCrds, startOperator } from '../testkit.ts';

// A Deployment's selector is immutable: an Agent whose shape change moves its pup's selector
// (standard "agent" pup ↔ "controller" pup) gets its Deployment replaced, not a 422 forever.
const NS = 'agent-replace';
let kube: KubeCluster;
let admin: KubeClient;
let op: Operator;

type Cond = { type: string; status: string; reason: string };
const cond = (o: KubeObject | undefined, type: string) =>
  ((o?.status ?? {}) as { conditions?: Cond[] }).conditions?.find((c) => c.type === type);
const component = (d: KubeObject | undefined) =>
  (d?.spec as { selector?: { matchLabels?: Record<string, string> } } | undefined)?.selector?.matchLabels?.[
    'app.kubernetes.io/component'
  ];

beforeAll(async () => {
  ({ kube, admin } = await startKubeWithCrds(NS, { controllerManager: true }));
  op = await startOperator(kube, NS);
  await admin.create(holtObject(NS, 'hr'));
});

afterAll(async () => {
  await op?.stop();
  admin?.close();
  await kube?.stop();
});

/** Waits for the Agent's Deployment to select `want` pods (a new object) and the Agent to be Ready. */
async function converged(want: string, oldUid?: string): Promise<KubeObject> {
  const dep = await eventually(
    `deployment selecting ${want} pods`,
    async () => {
      const d = await admin.get('Deployment', NS, 'flip');
      return component(d) === want && d?.metadata.uid !== oldUid ? d : undefined;
    },
    { timeoutMs: 40_000 },
  ).catch(async (e) => {
    console.log(JSON.stringify((await admin.get('Agent', NS, 'flip'))?.status));
    throw e;
  });
  const agent = await eventually(
    'the agent Ready',
    async () => {
      await fakeKubelet(admin, NS, { labelSelector: 'app.kubernetes.io/instance=flip' });
      const a = await admin.get('Agent', NS, 'flip');
      return cond(a, 'Ready')?.status === 'True' ? a : undefined;
    },
    { timeoutMs: 40_000 },
  );
  expect(cond(agent, 'Degraded')?.status).toBe('False');
  return dep;
}

const eventsOf = async (reason: string) =>
  (await admin.list('Event', NS)).items.filter(
    (e) => e.reason === reason && (e.regarding as { name: string }).name === 'flip',
  );
const replacedEvents = (n: number) =>
  eventually(`${n} DeploymentReplaced event(s)`, async () => {
    const l = await eventsOf('DeploymentReplaced');
    return l.length === n ? l : undefined;
  }).catch(async (e) => {
    const all = (await admin.list('Event', NS)).items;
    console.log(all.filter((x) => (x.regarding as { name: string }).name === 'flip').map((x) => x.reason));
    throw e;
  });

const patch = (strategy: string) => admin.mergePatch('Agent', NS, 'flip', { spec: { strategy } }, 'test');

describe('Agent strategy switch with replicas 1 (real API server + controller-manager)', () => {
  let uid: string | undefined;

  it('reuse: a standard pup Deployment selecting "agent" pods, the agent Ready', async () => {
    await admin.create(
      agentObject(NS, 'flip', {
        holt: 'hr',
        role: 'flip',
        command: ['/bin/true'],
        bidding: { strategy: 'claim' },
        strategy: 'reuse',
        replicas: 1,
      }),
    );
    uid = (await converged('agent')).metadata.uid;
    expect(await eventsOf('DeploymentReplaced')).toHaveLength(0);
  });

  it('→ fresh_per_call: the Deployment is replaced (new selector), an Event says why', async () => {
    await patch('fresh_per_call');
    uid = (await converged('controller', uid)).metadata.uid;
    const [e] = await replacedEvents(1);
    expect(e?.type).toBe('Normal');
    expect(String(e?.note)).toContain('Deployment/flip: spec.selector changed');
    // The old pup's pods go with the old Deployment (background propagation, GC).
    await eventually('old pods collected', async () => {
      const pods = await admin.list('Pod', NS, {
        labelSelector: 'app.kubernetes.io/instance=flip,app.kubernetes.io/component=agent',
      });
      return pods.items.length === 0;
    });
  });

  it('→ reuse again: replaced back', async () => {
    await patch('reuse');
    await converged('agent', uid);
    await replacedEvents(2);
    // Never a failed apply on the way (without the replacement: 422, field is immutable).
    expect(await eventsOf('ApplyFailed')).toHaveLength(0);
  });
});
