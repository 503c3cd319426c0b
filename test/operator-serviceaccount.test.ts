import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube, writeKubeconfig } from './harness/kube.ts';
import { freePort } from './harness/ports.ts';
import { type ServerProcess, spawnServer, waitReady } from './harness/proc.ts';
import { eventually } from './harness/wait.ts';

// Issue 8: `helm install` of the chart and `kubectl apply -f examples/k8s/` succeed, and the operator,
// run as a process with the chart's ServiceAccount token (not an admin), reconciles them. Any call
// the chart's RBAC does not allow shows up as a "forbidden" in its log and a missing object here.
const ROOT = join(import.meta.dirname, '..');
const NS = 'holt-system';
const SA = 'holt-holt-operator';

let kube: KubeCluster;
let operator: ServerProcess;

interface Obj {
  metadata: { generation?: number; ownerReferences?: { kind: string }[] };
  status?: { conditions?: { type: string; observedGeneration?: number }[]; selector?: string };
  spec?: { holderIdentity?: string };
}

const get = async (kind: string, name: string, ns = 'default'): Promise<Obj | undefined> => {
  const r = await kube.kubectlResult(['get', kind, name, '-n', ns, '-o', 'json'], { allowFail: true });
  return r.code === 0 ? (JSON.parse(r.stdout) as Obj) : undefined;
};

beforeAll(async () => {
  kube = await startKube();
  // The samples go to `default`: the chart's Role is made there (namespaced is the default).
  await kube.helm([
    'install',
    'holt',
    join(ROOT, 'charts', 'holt-operator'),
    '-n',
    NS,
    '--create-namespace',
    '--set',
    'watchNamespaces={default}',
  ]);
  await kube.kubectl([
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    'crd/holts.holt.io',
    'crd/agents.holt.io',
    'crd/workerpools.holt.io',
  ]);
  const token = (await kube.kubectl(['create', 'token', SA, '-n', NS, '--duration=1h'])).trim();
  const kubeconfig = join(kube.dir, 'operator-sa.kubeconfig');
  writeKubeconfig(kubeconfig, kube.server, kube.caPath, SA, token);
  await kube.kubectl(['apply', '-f', join(ROOT, 'examples', 'k8s')]);
  const health = await freePort();
  operator = spawnServer({
    name: 'holt-operator-sa',
    command: join(ROOT, 'bin', 'holt'),
    args: [
      'operator',
      `--lease-namespace=${NS}`,
      `--health-port=${health}`,
      `--metrics-port=${await freePort()}`,
    ],
    dir: kube.dir,
    env: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      POD_NAME: 'holt-operator-0',
      POD_NAMESPACE: NS,
      HOLT_OPERATOR_NAMESPACES: 'default',
    },
  });
  await waitReady(operator, async () => (await fetch(`http://127.0.0.1:${health}/readyz`)).ok, 60_000, 200);
}, 180_000);

afterAll(async () => {
  await operator?.stop(10_000);
  await kube?.stop();
});

describe("the operator under the chart's ServiceAccount", () => {
  it('takes the leader Lease in its namespace and reconciles the samples with only the granted rights', async () => {
    const lease = await eventually('the leader Lease', async () => {
      const l = await get('lease', 'holt-operator', NS);
      return l?.spec?.holderIdentity === 'holt-operator-0' ? l : undefined;
    });
    expect(lease.spec?.holderIdentity).toBe('holt-operator-0');

    const observed = (o: Obj | undefined) =>
      o?.status?.conditions?.some(
        (c) => c.type === 'Ready' && c.observedGeneration === o.metadata.generation,
      );
    for (const [kind, name] of [
      ['holt', 'minimal'],
      ['holt', 'demo'],
      ['agent', 'demo-drafter'],
      ['agent', 'minimal-coder'],
      ['workerpool', 'minimal-coder-workers'],
    ] as const)
      await eventually(
        `${kind}/${name} status written by the operator`,
        async () => (observed(await get(kind, name)) ? true : undefined),
        { timeoutMs: 60_000 },
      );

    // Objects it applied (server-side apply as holt-operator), owned by their resource.
    for (const [kind, name, owner] of [
      ['deployment', 'minimal-orchestrator', 'Holt'],
      ['statefulset', 'minimal-redis', 'Holt'],
      ['secret', 'minimal-redis', 'Holt'],
      ['networkpolicy', 'minimal-default-deny', 'Holt'],
      ['deployment', 'demo-drafter', 'Agent'],
      ['deployment', 'minimal-coder-workers', 'WorkerPool'],
    ] as const) {
      const o = await eventually(`${kind}/${name}`, () => get(kind, name), { timeoutMs: 60_000 });
      expect(o.metadata.ownerReferences?.map((r) => r.kind)).toContain(owner);
    }
    expect((await get('workerpool', 'minimal-coder-workers'))?.status?.selector).toBeTruthy();

    const log = readFileSync(operator.logFile, 'utf8');
    expect(log).not.toMatch(/forbidden/i);
  });
});
