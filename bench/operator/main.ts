/**
 * 100 Holts × 5 Agents applied at once against a real kube-apiserver; prints JSON:
 * time until all are Ready, API requests per minute in steady state, operator RSS.
 *
 * No kubelet or controller-manager runs, so a "fake kubelet" here writes the status the
 * controllers would (Deployments/StatefulSets: all replicas ready; Jobs: succeeded) as soon as each
 * object appears. Ready is then exactly what the operator computes from those API objects. The
 * operator runs in a child process (bench/operator/child.ts) so its RSS is its own; the agent
 * registry goes to an in-memory RegistryWriter (no 100 Redis servers). Steady state is measured
 * from the moment the operator is quiescent (Operator.settled). Run:
 *   node bench/operator/main.ts [holts=100] [agents=5] [steadySeconds=30]
 * BENCH_DEBUG=1 logs every write of the operator (stderr); BENCH_TOP=N prints the N paths written most
 * until Ready; BENCH_READY_LIMIT_S (300) bounds the wait for Ready.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KubeClient, type KubeObject, refOf } from '../../src/operator/kube/kube.ts';
import { installCrds } from '../../src/operator/testkit.ts';
import { startKube } from '../../test/harness/kube.ts';
import type { ChildReply, ChildRequest } from './child.ts';

const HOLTS = Number(process.argv[2] ?? 100);
const AGENTS = Number(process.argv[3] ?? 5);
const STEADY_S = Number(process.argv[4] ?? 30);
/** How long to wait for all Ready before reporting what is not (BENCH_READY_LIMIT_S). */
const READY_LIMIT_S = Number(process.env.BENCH_READY_LIMIT_S ?? 300);
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
          .patch(refOf(kind, NS, o.metadata.name), { status }, { subresource: 'status' })
          .catch(() => undefined);
      }),
    );
  }
}

type Stats = Extract<ChildReply, { type: 'stats' }>;

/** The operator process and a request/reply helper over its IPC channel. */
function startOperator(kubeconfigPath: string) {
  const child = fork(fileURLToPath(new URL('./child.ts', import.meta.url)), [kubeconfigPath, NS], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // The V8 flags of the operator image's ENTRYPOINT (images/operator.Dockerfile); set
    // BENCH_OPERATOR_NODE_OPTIONS to try others ('' for none).
    execArgv: (process.env.BENCH_OPERATOR_NODE_OPTIONS ?? '--optimize-for-size').split(' ').filter(Boolean),
  });
  const next = <T extends ChildReply['type']>(type: T) =>
    new Promise<Extract<ChildReply, { type: T }>>((resolve, reject) => {
      const onMsg = (m: ChildReply) => {
        if (m.type !== type) return;
        child.off('message', onMsg);
        child.off('exit', onExit);
        resolve(m as Extract<ChildReply, { type: T }>);
      };
      const onExit = (code: number | null) => reject(new Error(`operator exited (${code})`));
      child.on('message', onMsg);
      child.once('exit', onExit);
    });
  const ask = <T extends ChildReply['type']>(req: ChildRequest, type: T) => {
    const p = next(type);
    child.send(req);
    return p;
  };
  return { child, next, ask };
}

async function main(): Promise<void> {
  const kube = await startKube();
  const admin = new KubeClient(kube.kubeconfig);
  await installCrds(admin);
  await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  const op = startOperator(kube.kubeconfigPath);
  await op.next('started');
  const s0: Stats = await op.ask({ type: 'stats' }, 'stats');

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
  let notReady = '';
  const ready = (o: KubeObject) =>
    ((o.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? []).some(
      (c) => c.type === 'Ready' && c.status === 'True',
    );
  while (Date.now() - t0 < READY_LIMIT_S * 1000) {
    await fakeStatus(admin);
    const holts = (await admin.list('Holt', NS)).items;
    const agents = (await admin.list('Agent', NS)).items;
    if (holts.length === HOLTS && holts.every(ready) && agents.every(ready)) {
      readyMs = Date.now() - t0;
      break;
    }
    const bad = [...holts, ...agents].filter((o) => !ready(o));
    notReady = `${bad.length} not ready, e.g. ${bad[0]?.kind}/${bad[0]?.metadata.name}: ${JSON.stringify(
      (bad[0]?.status as { conditions?: unknown } | undefined)?.conditions ?? 'no status',
    ).slice(0, 400)}`;
    await sleep(250);
  }
  const s1 = await op.ask({ type: 'stats' }, 'stats');
  await op.ask({ type: 'settle' }, 'settled');
  const settledMs = Date.now() - t0;
  const s2 = await op.ask({ type: 'stats' }, 'stats');
  await sleep(STEADY_S * 1000);
  const s3 = await op.ask({ type: 'stats' }, 'stats');
  const perMin = 60 / STEADY_S;
  const steadyWrites: Record<string, number> = {};
  for (const [k, n] of Object.entries(s3.writesByPath)) {
    const d = n - (s2.writesByPath[k] ?? 0);
    if (d) steadyWrites[k] = d;
  }
  console.log(
    JSON.stringify({
      holts: HOLTS,
      agentsPerHolt: AGENTS,
      applyMs: applied,
      allReadyMs: readyMs,
      ...(readyMs < 0 ? { notReady } : {}),
      settledMs,
      operatorRequestsUntilReady: s1.requests - s0.requests,
      operatorWritesUntilReady: s1.writes - s0.writes,
      writesUntilReadyByPath: Object.fromEntries(
        Object.entries(s1.writesByPath)
          .sort((a, b) => b[1] - a[1])
          .slice(0, Number(process.env.BENCH_TOP ?? 0)),
      ),
      steadySeconds: STEADY_S,
      steadyWritesPerMinute: (s3.writes - s2.writes) * perMin,
      steadyRequestsPerMinute: (s3.requests - s2.requests) * perMin,
      ...(s3.writes > s2.writes ? { steadyWrites } : {}),
      operatorRssMB: s3.rssMB,
      operatorHeapMB: s3.heapMB,
      operatorHeapTotalMB: s3.heapTotalMB,
      operatorExternalMB: s3.externalMB,
      cachedObjects: s3.cachedObjects,
      cachedJsonMB: s3.cachedJsonMB,
      operatorRssBeforeApplyMB: s0.rssMB,
      note: 'requests exclude watch streams; RSS is the operator process alone',
    }),
  );
  op.child.send({ type: 'stop' } satisfies ChildRequest);
  await new Promise((r) => op.child.once('exit', r));
  admin.close();
  await kube.stop();
}

await main();
