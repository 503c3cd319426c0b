import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube, writeKubeconfig } from '../../test/harness/kube.ts';

/**
 * `holt --kube` against a real API server, where the API server is the judge: a missing Holt, a user
 * without the right to read it, a Holt whose Redis has no ready pod. (Port-forwarding itself needs a
 * kubelet: e2e/cluster.test.ts runs forage, hoard, status and send through it on the real cluster;
 * logs, questions, answer and graph against a cluster Holt are not proven yet: issue 29.)
 */
const HOLT = join(import.meta.dirname, '..', '..', 'bin', 'holt');
const run = promisify(execFile);
let kube: KubeCluster;

async function holt(kubeconfig: string, args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await run(HOLT, args, { env: { ...process.env, KUBECONFIG: kubeconfig, NO_COLOR: '1' } });
    return { code: 0, stderr: '' };
  } catch (e) {
    const x = e as { code: number; stderr: string };
    return { code: x.code, stderr: x.stderr };
  }
}

beforeAll(async () => {
  kube = await startKube();
  await kube.kubectl(['apply', '--server-side', '-f', join(import.meta.dirname, '..', '..', 'crds')]);
  await kube.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  await kube.kubectl(['apply', '-f', '-'], {
    input: 'apiVersion: holt.io/v1alpha1\nkind: Holt\nmetadata: {name: demo, namespace: default}\nspec: {}\n',
  });
}, 120_000);

afterAll(async () => {
  await kube?.stop();
});

describe('holt --kube against the API server', () => {
  it('a Holt that does not exist: exit 3, named with its namespace', async () => {
    const r = await holt(kube.kubeconfigPath, ['--kube', 'default/nope', 'hoard']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('Holt default/nope not found');
  });

  it('a Holt no operator has reconciled (no status): says which operator watches what (issue 29)', async () => {
    const none = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'status']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('Holt default/demo has no status yet');
    expect(none.stderr).toContain('no Holt operator runs in this cluster');
    // The chart's operator, watching another namespace (no kubelet here: the Deployment object is enough).
    await kube.kubectl(['create', 'namespace', 'holt-system']);
    await kube.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {
          name: 'holt-operator',
          namespace: 'holt-system',
          labels: { 'app.kubernetes.io/name': 'holt-operator' },
        },
        spec: {
          selector: { matchLabels: { app: 'op' } },
          template: {
            metadata: { labels: { app: 'op' } },
            spec: {
              containers: [
                {
                  name: 'operator',
                  image: 'op',
                  env: [{ name: 'HOLT_OPERATOR_NAMESPACES', value: 'team-a' }],
                },
              ],
            },
          },
        },
      }),
    });
    const r = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'status']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('namespace default is not watched (holt-system/holt-operator watches team-a)');
    expect(r.stderr).toContain('watchNamespaces={...,default}');
  });

  it('a bundled Redis without a ready pod: a clear error, not a hang', async () => {
    await kube.kubectl(['create', 'service', 'clusterip', 'demo-redis', '--tcp=6379:6379', '-n', 'default']);
    const r = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'hoard']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the Redis of Holt default\/demo is not ready yet \(no pod\)/);
  });

  it('a user without the right to read Holts is told what the API server forbade', async () => {
    await kube.kubectl(['create', 'serviceaccount', 'nobody', '-n', 'default']);
    const token = (
      await kube.kubectl(['create', 'token', 'nobody', '-n', 'default', '--duration=1h'])
    ).trim();
    const kc = join(kube.dir, 'nobody.kubeconfig');
    writeKubeconfig(kc, kube.server, kube.caPath, 'nobody', token);
    const r = await holt(kc, ['--kube', 'default/demo', 'status']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/forbidden: .*cannot get resource "holts" in API group "holt.io"/);
    // The token never appears in what the user sees.
    expect(r.stderr).not.toContain(token);
  });
});
