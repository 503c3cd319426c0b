/**
 * 100 Holts × 5 Agents applied at once against a real kube-apiserver; prints JSON:
 * time until all are Ready, API requests per minute in steady state, operator RSS.
 *
 * No kubelet or controller-manager runs, so a "fake kubelet" here writes the status the
 * controllers would (Deployments/StatefulSets: all replicas ready; Jobs: succeeded) as soon as each
 * object appears. Ready is then exactly what the operator computes from those API objects. The
 * agent registry goes to an in-memory RegistryWriter (no 100 Redis servers). Run:
 *   node bench/operator/main.ts [holts=100] [agents=5] [steadySeconds=30]
 */
import { silentLogger } from '../../src/common/logger.ts';
import type { RegistryWriter } from '../../src/operator/controllers/registry.ts';
import { Operator } from '../../src/operator/operator.ts';
import { KubeClient, type KubeObject } from '../../src/operator/runtime/kube.ts';
import { installCrds } from '../../src/operator/testkit.ts';
import { startKube } from '../../test/harness/kube.ts';

const HOLTS = Number(process.argv[2] ?? 100);
const AGENTS = Number(process.argv[3] ?? 5);
const STEADY_S = Number(process.argv[4] ?? 30);
const NS = 'bench';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function fakeStatus(c: KubeClient): Promise<void> {
  for (const kind of ['Deployment', 'StatefulSet', 'Job'] as const) {
    const list = await c.list(kind, NS, { labelSelector: 'app.kubernetes.io/managed-by=holt-operator' });
    await Promise.all(
      list.items.map(async (o: KubeObject) => {
        const st = (o.status ?? {}) as { observedGeneration?: number; succeeded?: number };
        const n = (o.spec as { replicas?: number }).replicas ?? 1;
        let status: Record<string, unknown>;
        if (kind === 'Job') {
          if (st.succeeded) return;
          status = { succeeded: 1, startTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') };
        } else {
          if (st.observedGeneration === o.metadata.generation) return;
          status = {
            observedGeneration: o.metadata.generation,
            replicas: n,
            readyReplicas: n,
            updatedReplicas: n,
            availableReplicas: n,
            ...(kind === 'StatefulSet'
              ? { currentReplicas: n, currentRevision: 'r1', updateRevision: 'r1' }
              : {}),
          };
        }
        await c
          .request(
            'patch',
            'PATCH',
            `/apis/${kind === 'Job' ? 'batch' : 'apps'}/v1/namespaces/${NS}/${kind.toLowerCase()}s/${o.metadata.name}/status`,
            { status },
            'application/merge-patch+json',
          )
          .catch(() => undefined);
      }),
    );
  }
}

async function main(): Promise<void> {
  const kube = await startKube();
  const admin = new KubeClient(kube.kubeconfig);
  await installCrds(admin);
  await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  const registry: RegistryWriter = { write: async () => undefined };
  const client = new KubeClient(kube.kubeconfig);
  const op = new Operator({ client, log: silentLogger(), namespaces: [NS], registry, concurrency: 8 });
  await op.startInformers();
  op.startControllers();
  const rss0 = process.memoryUsage().rss;

  const t0 = Date.now();
  const objs: KubeObject[] = [];
  for (let h = 0; h < HOLTS; h++) {
    objs.push({
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: `h${h}`, namespace: NS },
      spec: {},
    });
    for (let a = 0; a < AGENTS; a++)
      objs.push({
        apiVersion: 'holt.io/v1alpha1',
        kind: 'Agent',
        metadata: { name: `h${h}-a${a}`, namespace: NS },
        spec: {
          holt: `h${h}`,
          role: `a${a}`,
          command: ['/bin/true'],
          bidding: { strategy: 'claim' },
          ...(a === 0 ? { replicas: 3 } : {}),
        },
      });
  }
  for (let i = 0; i < objs.length; i += 50)
    await Promise.all(objs.slice(i, i + 50).map((o) => admin.create(o)));
  const applied = Date.now() - t0;
  let readyMs = -1;
  while (Date.now() - t0 < 300_000) {
    await fakeStatus(admin);
    const holts = (await admin.list('Holt', NS)).items;
    const agents = (await admin.list('Agent', NS)).items;
    const ready = (o: KubeObject) =>
      ((o.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? []).some(
        (c) => c.type === 'Ready' && c.status === 'True',
      );
    if (holts.length === HOLTS && holts.every(ready) && agents.every(ready)) {
      readyMs = Date.now() - t0;
      break;
    }
    await sleep(250);
  }
  await sleep(3000);
  await op.idle();
  if (process.env.BENCH_DEBUG)
    client.onRequest = (r) => r.verb !== 'get' && r.verb !== 'list' && console.error('WRITE', r.verb, r.path);
  const w0 = client.writes();
  const r0 = client.total();
  await sleep(STEADY_S * 1000);
  const perMin = 60 / STEADY_S;
  const rss = process.memoryUsage().rss;
  console.log(
    JSON.stringify({
      holts: HOLTS,
      agentsPerHolt: AGENTS,
      applyMs: applied,
      allReadyMs: readyMs,
      operatorRequestsTotal: r0,
      steadyWritesPerMinute: (client.writes() - w0) * perMin,
      steadyRequestsPerMinute: (client.total() - r0) * perMin,
      rssMB: Math.round(rss / 2 ** 20),
      rssBeforeApplyMB: Math.round(rss0 / 2 ** 20),
      note: 'requests exclude watch streams; rss is the bench process (operator in-process + bench client)',
    }),
  );
  await op.stop();
  client.close();
  admin.close();
  await kube.stop();
}

await main();
