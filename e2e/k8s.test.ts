import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { Blackboard } from '../src/blackboard/client.ts';
import type { Artefact } from '../src/blackboard/types.ts';
import { DEFAULT_RUNTIME_IMAGE } from '../src/operator/operator.ts';
import { workspaceClaim } from '../src/operator/specs/workspace.ts';
import { type KubeCluster, startKube } from '../test/harness/kube.ts';
import { type NatsServer, startNats } from '../test/harness/nats.ts';
import { freePort } from '../test/harness/ports.ts';
import { type PostgresServer, startPostgres } from '../test/harness/postgres.ts';
import { type ServerProcess, spawnServer, waitReady } from '../test/harness/proc.ts';
import { type RedisServer, startRedis } from '../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../test/harness/tmp.ts';
import { eventually } from '../test/harness/wait.ts';
import { TestKubelet } from '../test/kubelet/kubelet.ts';
import { expectDemoTrail } from './demo-trail.ts';

/**
 * A whole Holt on Kubernetes: the operator (a `holt operator` process), the orchestrator and the
 * pups in pods that the test kubelet runs as local processes, from `kubectl apply` of the demo
 * manifests to a finished workflow. The stores are the Holt's `external` ones: servers this test
 * starts, handed to the Holt through Secrets and a URL.
 */
const ROOT = resolve(import.meta.dirname, '..');
const NS = 'default';

let kube: KubeCluster;
let redis: RedisServer;
let nats: NatsServer;
let pgServer: PostgresServer;
let kubelet: TestKubelet;
let operator: ServerProcess;
let dir: string;
const trace: string[] = [];

/** Polls until `check` returns a value; the message carries what the cluster looked like. */
function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  return eventually(what, check, {
    timeoutMs,
    intervalMs: 250,
    describe: async () => {
      const pods = await kube.kubectl(['get', 'pods', '-n', NS, '-o', 'wide'], { allowFail: true });
      return (
        `${pods}\nkubelet errors: ${kubelet.errors.join('\n')}\n${kubelet.allLogs()}\n` +
        `operator:\n${operator.tail(30)}\nkubelet trace:\n${trace.slice(-40).join('\n')}`
      );
    },
  });
}

async function getJson<T>(args: string[]): Promise<T | undefined> {
  const r = await kube.kubectlResult(['get', ...args, '-n', NS, '-o', 'json'], { allowFail: true });
  return r.code === 0 ? (JSON.parse(r.stdout) as T) : undefined;
}

/**
 * examples/k8s/demo.yaml as the Holt `holt` (its Agents renamed to match), pointed at this test's
 * servers: Redis by a Secret key, NATS by URL, Postgres by a Secret with CloudNativePG's -app keys.
 * `replicas` makes agents scalable (a controller pup and a WorkerPool of inbox workers).
 */
function demoManifests(holt: string, replicas: Record<string, number> = {}): string {
  type Doc = { kind: string; metadata: { name: string }; spec?: Record<string, unknown> };
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'examples', 'k8s', 'demo.yaml'), 'utf8')).map(
    (d) => d.toJS() as Doc,
  );
  for (const d of docs) {
    if (d.kind === 'Holt') {
      d.metadata.name = holt;
      // The demo counts a bid missing after 10 s as ignore. Every bid here is a node process started
      // on a CI machine that may be running other suites: a slow one must not change the workflow
      // (a CI run ended without the parallel phase, most likely so: the Linter bid too late).
      const orchestrator = (d.spec?.orchestrator ?? {}) as Record<string, unknown>;
      d.spec = {
        ...d.spec,
        orchestrator: { ...orchestrator, bidTimeoutSeconds: 120 },
        stores: {
          redis: { mode: 'external', urlSecretRef: { name: `${holt}-redis`, key: 'url' } },
          nats: { mode: 'external', url: nats.url },
          postgres: { mode: 'external', secretName: `${holt}-postgres-app` },
        },
      };
    }
    if (d.kind === 'Agent' && d.spec) {
      d.metadata.name = d.metadata.name.replace(/^demo-/, `${holt}-`);
      d.spec.holt = holt;
      const n = replicas[String(d.spec.role)];
      if (n) d.spec.replicas = n;
    }
  }
  const u = new URL(pgServer.url);
  const secrets = [
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: `${holt}-redis` }, stringData: { url: redis.url } },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `${holt}-postgres-app` },
      stringData: {
        uri: pgServer.url,
        host: u.hostname,
        port: u.port,
        username: decodeURIComponent(u.username),
        password: decodeURIComponent(u.password),
        dbname: u.pathname.slice(1),
      },
    },
  ];
  return [...secrets, ...docs].map((d) => stringify(d)).join('---\n');
}

/** The workspace PVC's directory, seeded as a git repository (the Publisher commits into it). */
function seedWorkspace(holt: string): (...args: string[]) => string {
  const ws = kubelet.claimDir(NS, workspaceClaim(holt));
  const git = (...a: string[]) => execFileSync('git', a, { cwd: ws, encoding: 'utf8' }).trim();
  git('init', '-q');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'init');
  return git;
}

async function waitHoltReady(holt: string): Promise<void> {
  type Holt = { status?: { phase?: string; agents?: { total?: number; ready?: number } } };
  await until(
    `Holt ${holt} to be Ready with its 5 agents`,
    async () => {
      const h = await getJson<Holt>(['holt', holt]);
      return h?.status?.phase === 'Ready' && h.status.agents?.total === 5 && h.status.agents.ready === 5
        ? true
        : undefined;
    },
    180_000,
  );
}

/** Writes the goal (as `holt forage` does) and returns the artefacts once one is Terminal. */
async function runGoal(holt: string): Promise<Artefact[]> {
  const bb = Blackboard.connect(redis.url, holt);
  try {
    const goal = crypto.randomUUID();
    await bb.createArtefact({
      id: goal,
      logical_id: goal,
      version: 1,
      structural_type: 'Standard',
      type: 'GoalDefined',
      payload: 'publish a plan',
      source_artefacts: [],
      produced_by_role: 'user',
    });
    return await until(
      `the Terminal artefact of ${holt}`,
      async () => {
        const all = (await bb.getArtefacts(await bb.listArtefactIds())).filter(
          (a): a is Artefact => a !== null,
        );
        return all.some((a) => a.structural_type === 'Terminal') ? all : undefined;
      },
      180_000,
    );
  } finally {
    await bb.close();
  }
}

/** The demo trail, or on a mismatch every claim's consensus (bids as decided, bids as stored) too. */
async function expectTrail(holt: string, trail: Artefact[], git: (...args: string[]) => string) {
  try {
    expectDemoTrail(trail, git);
  } catch (e) {
    const bb = Blackboard.connect(redis.url, holt);
    try {
      const types = new Map(trail.map((a) => [a.id, `${a.type}@${a.version}`]));
      for (const vc of await bb.getClaims(await bb.listClaimIds())) {
        if (!vc) continue;
        const c = vc.claim;
        console.log(
          `claim of ${types.get(c.artefact_id)}: ${c.status} ${c.dormant_reason ?? ''}`,
          `decided on ${JSON.stringify(c.phase_state?.all_bids ?? {})}, stored ${JSON.stringify(await bb.getBids(c.id))}`,
        );
      }
    } catch (d) {
      console.log(`(could not read the claims: ${String(d)})`);
    } finally {
      await bb.close();
    }
    throw e;
  }
}

/**
 * Deletes the Holt: what it owns goes, and its Agents (the user's own resources, still there) stop their
 * pods. Then the Agents; every pod goes and no process the kubelet started survives.
 */
async function deleteAll(holt: string): Promise<void> {
  await kube.kubectl(['delete', 'holt', holt, '-n', NS, '--wait=false']);
  await until(`every pod of ${holt} to stop with its Holt`, async () =>
    kubelet.running().some((p) => p.pod.startsWith(`${NS}/${holt}-`)) ? undefined : true,
  );
  const agents = await getJson<{ items: unknown[] }>(['agents']);
  expect(agents?.items.length).toBeGreaterThan(0);
  await kube.kubectl(['delete', 'agents', '--all', '-n', NS, '--wait=false']);
  await until('every pod to be gone and every process to exit', async () => {
    const pods = await getJson<{ items: unknown[] }>(['pods']);
    return pods?.items.length === 0 && kubelet.running().length === 0 ? true : undefined;
  });
  const alive = kubelet.processes().filter((p) => {
    try {
      process.kill(p.pid, 0);
      return true;
    } catch {
      return false;
    }
  });
  expect(alive).toEqual([]);
}

beforeAll(async () => {
  dir = makeTempDir('k8s-e2e');
  [kube, redis, nats, pgServer] = await Promise.all([
    startKube({ controllerManager: true }),
    startRedis(),
    startNats(),
    startPostgres('holt_k8s'),
  ]);
  await kube.kubectl(['apply', '--server-side', '-f', join(ROOT, 'crds')]);
  await kube.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  kubelet = new TestKubelet({
    kubeconfig: kube.kubeconfig,
    namespace: NS,
    root: join(dir, 'kubelet'),
    repoRoot: ROOT,
    runtimeImages: [DEFAULT_RUNTIME_IMAGE],
    // No imagePaths: the demo's scripts reach the pups only through the Agent's ConfigMap volume.
    log: (l) => trace.push(`${new Date().toISOString()} ${l}`),
  });
  await kubelet.start();
  const health = await freePort();
  const metrics = await freePort();
  operator = spawnServer({
    name: 'holt-operator',
    command: join(ROOT, 'bin', 'holt'),
    args: [
      'operator',
      '--leader-elect=false',
      `--namespaces=${NS}`,
      `--health-port=${health}`,
      `--metrics-port=${metrics}`,
    ],
    dir,
    env: { ...process.env, KUBECONFIG: kube.kubeconfigPath, POD_NAME: 'holt-operator-e2e' },
  });
  await waitReady(operator, async () => (await fetch(`http://127.0.0.1:${health}/readyz`)).ok, 60_000, 200);
}, 180_000);

afterAll(async () => {
  // HOLT_E2E_TRACE=1 prints what the kubelet did (pods admitted, processes started and stopped).
  if (process.env.HOLT_E2E_TRACE) console.log(trace.join('\n'));
  await operator?.stop(10_000);
  await kubelet?.stop();
  await kube?.stop();
  await Promise.all([redis?.stop(), nats?.stop(), pgServer?.stop()]);
  if (dir) removeDir(dir);
}, 120_000);

describe('Holt on Kubernetes, end to end (operator, orchestrator and pups as pods)', () => {
  it('kubectl apply of the demo → Ready → a finished workflow → delete leaves no process', async () => {
    const git = seedWorkspace('demo');
    await kube.kubectl(['apply', '-n', NS, '-f', '-'], { input: demoManifests('demo') });
    await waitHoltReady('demo');
    // Every pod ran here: the migration Job's pod finished, the orchestrator and five pups run.
    const ran = kubelet.processes();
    for (const c of ['migrate', 'orchestrator', 'drafter', 'reviewer', 'linter', 'publisher', 'finisher'])
      expect(ran.some((p) => p.pod.startsWith(`${NS}/demo-${c}-`))).toBe(true);

    await expectTrail('demo', await runGoal('demo'), git);
    await deleteAll('demo');
  }, 600_000);

  it('a scalable agent (replicas 2): the worker pods of its WorkerPool execute its claims from the inbox', async () => {
    const git = seedWorkspace('scale');
    await kube.kubectl(['apply', '-n', NS, '-f', '-'], { input: demoManifests('scale', { Drafter: 2 }) });
    await waitHoltReady('scale');
    const pool = await until("the Drafter's WorkerPool", () =>
      getJson<{ spec: { target: string } }>(['workerpool', 'scale-drafter-workers']),
    );
    expect(pool.spec.target).toBe('drafter');

    await expectTrail('scale', await runGoal('scale'), git);
    // Both drafts (the first and the rework) were inbox rows of the pool's target, done by workers.
    const db = new pg.Client({ connectionString: pgServer.url });
    await db.connect();
    try {
      const rows = await db.query<{ phase: string; status: string }>(
        'SELECT phase, status FROM holt.agent_inbox WHERE instance = $1 AND worker_target = $2 ORDER BY id',
        ['scale', 'drafter'],
      );
      expect(rows.rows.length).toBe(2);
      expect(rows.rows.every((r) => r.status === 'done')).toBe(true);
    } finally {
      await db.end();
    }
    const workers = kubelet.processes().filter((p) => p.pod.startsWith(`${NS}/scale-drafter-workers-`));
    expect(workers.length).toBeGreaterThanOrEqual(1);
    await deleteAll('scale');
  }, 600_000);
});
