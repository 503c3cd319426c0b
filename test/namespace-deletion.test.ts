import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube, writeKubeconfig } from './harness/kube.ts';
import { freePort } from './harness/ports.ts';
import { type ServerProcess, spawnServer, waitReady } from './harness/proc.ts';
import { eventually } from './harness/wait.ts';

// Issue 29: `kubectl delete ns` of a namespace holding a Holt hung for ever. The namespace's deletion
// removes the chart's RoleBinding with the rest; the operator then got 403 on agents.holt.io and the
// Agents kept their `holt.io/registry` finalizer. Here the operator runs with the chart's
// ServiceAccount and RBAC (a real API server and controller-manager: the namespace controller and the
// garbage collector; no kubelet, the e2e on the real cluster has one) and the namespace must go.
const ROOT = join(import.meta.dirname, '..');
const OP_NS = 'holt-system';
const SA = 'holt-holt-operator';
const DOOMED = 'doomed';

let kube: KubeCluster;
let operator: ServerProcess;

beforeAll(async () => {
  kube = await startKube({ controllerManager: true });
  await kube.kubectl(['create', 'namespace', DOOMED]);
  await kube.helm([
    'install',
    'holt',
    join(ROOT, 'charts', 'holt-operator'),
    '-n',
    OP_NS,
    '--create-namespace',
    '--set',
    `watchNamespaces={${DOOMED}}`,
  ]);
  await kube.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/agents.holt.io']);
  const token = (await kube.kubectl(['create', 'token', SA, '-n', OP_NS, '--duration=1h'])).trim();
  const kubeconfig = join(kube.dir, 'operator-sa.kubeconfig');
  writeKubeconfig(kubeconfig, kube.server, kube.caPath, SA, token);
  const health = await freePort();
  operator = spawnServer({
    name: 'holt-operator-ns',
    command: join(ROOT, 'bin', 'holt'),
    args: [
      'operator',
      `--lease-namespace=${OP_NS}`,
      `--health-port=${health}`,
      `--metrics-port=${await freePort()}`,
    ],
    dir: kube.dir,
    env: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      POD_NAME: 'holt-operator-0',
      POD_NAMESPACE: OP_NS,
      HOLT_OPERATOR_NAMESPACES: DOOMED,
    },
  });
  await waitReady(operator, async () => (await fetch(`http://127.0.0.1:${health}/readyz`)).ok, 60_000, 200);
}, 180_000);

afterAll(async () => {
  await operator?.stop(10_000);
  await kube?.stop();
});

const AGENT = (name: string, role: string) =>
  `apiVersion: holt.io/v1alpha1\nkind: Agent\nmetadata: {name: ${name}, namespace: ${DOOMED}}\nspec: {holt: h, role: ${role}, command: [sh, -c, 'echo x'], bidding: {strategy: exclusive}}\n`;

describe('deleting a namespace that holds a Holt', () => {
  it('finishes: no finalizer outlives the RoleBinding the deletion removes first', async () => {
    await kube.kubectl(['apply', '-f', '-'], {
      input: [
        `apiVersion: holt.io/v1alpha1\nkind: Holt\nmetadata: {name: h, namespace: ${DOOMED}}\nspec: {}\n`,
        AGENT('h-writer', 'Writer'),
        AGENT('h-reader', 'Reader'),
      ].join('---\n'),
    });
    // The operator has reconciled every Agent (their status is its write).
    for (const name of ['h-writer', 'h-reader'])
      await eventually(
        `agent ${name} reconciled`,
        async () => {
          const r = await kube.kubectlResult(
            ['get', 'agent', name, '-n', DOOMED, '-o', 'jsonpath={.status.conditions}'],
            {
              allowFail: true,
            },
          );
          return r.code === 0 && r.stdout.includes('Ready') ? true : undefined;
        },
        { timeoutMs: 60_000 },
      );
    const finalizers = await kube.kubectl([
      'get',
      'agents',
      '-n',
      DOOMED,
      '-o',
      'jsonpath={.items[*].metadata.finalizers}',
    ]);
    expect(finalizers.trim()).toBe('');

    await kube.kubectl(['delete', 'namespace', DOOMED, '--wait=false']);
    const gone = await eventually(
      'the namespace gone',
      async () =>
        (await kube.kubectlResult(['get', 'namespace', DOOMED], { allowFail: true })).code !== 0
          ? true
          : undefined,
      {
        timeoutMs: 60_000,
        intervalMs: 500,
        describe: async () =>
          (
            await kube.kubectlResult(['get', 'namespace', DOOMED, '-o', 'jsonpath={.status.conditions}'], {
              allowFail: true,
            })
          ).stdout,
      },
    );
    expect(gone).toBe(true);
  }, 120_000);
});
