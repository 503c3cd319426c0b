import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import type { Artefact } from '../src/blackboard/types.ts';
import { VERSION } from '../src/common/version.ts';
import { call, type ScriptedReply, text } from '../test/harness/llm.ts';
import { spawnServer } from '../test/harness/proc.ts';
import { eventually } from '../test/harness/wait.ts';
import { GIT_SECRET, gitServer, llmServer, tcpTarget, toolService } from './cluster/fixtures.ts';
import { notApplicable } from './cluster/not-applicable.ts';
import { type E2eTarget, e2eTarget } from './cluster/target.ts';
import { DEMO_LLM_PLAN, DEMO_LLM_SCRIPT } from './demo-llm-script.ts';
import { expectDemoTrail } from './demo-trail.ts';
import { MONITORING_NS, type PromVector, prometheusApi, prometheusManifests } from './prometheus.ts';

/**
 * The whole product on a real cluster: the chart installed with the built operator image, Holts from
 * `kubectl apply`, bundled stores as StatefulSets on PVCs, every agent in a real container run by a
 * real kubelet, goals and trails through `holt --kube`. The project's own cluster (two nodes) unless
 * HOLT_E2E_KUBECONFIG names another (kind: e2e/kind/run.sh).
 */
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const NS = 'holt-e2e';
const run = promisify(execFile);
const progress = (l: string) => console.log(`[e2e ${new Date().toISOString().slice(11, 19)}] ${l}`);

let c: E2eTarget;

const PLAN = DEMO_LLM_PLAN;

const kubectl = (args: string[], input?: string) => c.kubectl(['-n', NS, ...args], { input });
async function getJson<T>(args: string[]): Promise<T | undefined> {
  const r = await c.kubectlResult(['-n', NS, 'get', ...args, '-o', 'json'], { allowFail: true });
  return r.code === 0 ? (JSON.parse(r.stdout) as T) : undefined;
}

/** What the namespace looks like, for a failed wait's message. */
async function describeNs(): Promise<string> {
  const all = await c.kubectlResult(
    ['-n', NS, 'get', 'holts,agents,workerpools,pods,pvc,jobs', '-o', 'wide'],
    { allowFail: true },
  );
  const events = await c.kubectlResult(['-n', NS, 'get', 'events', '--sort-by=.lastTimestamp'], {
    allowFail: true,
  });
  const op = await c.kubectlResult(['-n', 'holt-system', 'logs', 'deploy/holt-operator', '--tail=30'], {
    allowFail: true,
  });
  return `${all.stdout}${all.stderr}\nevents:\n${events.stdout.split('\n').slice(-25).join('\n')}\noperator:\n${op.stdout}`;
}

function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 240_000): Promise<T> {
  return eventually(what, check, { timeoutMs, intervalMs: 1000, describe: describeNs });
}

/** `holt --kube <ns>/<holt> ...` as a user runs it, with the e2e kubeconfig. */
async function holt(holtName: string, args: string[]): Promise<string> {
  try {
    const r = await run(HOLT, ['--kube', `${NS}/${holtName}`, ...args], {
      env: { ...process.env, KUBECONFIG: c.kubeconfigPath, NO_COLOR: '1' },
      maxBuffer: 32 << 20,
      timeout: 300_000,
    });
    return r.stdout;
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    throw new Error(
      `holt --kube ${NS}/${holtName} ${args.join(' ')} exited ${x.code}: ${x.stderr}\n${x.stdout}`,
    );
  }
}

async function trailOf(holtName: string): Promise<Artefact[]> {
  const out = await holt(holtName, ['hoard', '-o', 'jsonl']);
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Artefact)
    .sort((a, b) => a.created_at_ms - b.created_at_ms);
}

type Pod = {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec: { nodeName?: string; volumes?: { persistentVolumeClaim?: { claimName: string } }[] };
  status: { phase?: string; containerStatuses?: { name: string; restartCount: number; ready: boolean }[] };
};
const pods = async (selector: string) =>
  (await getJson<{ items: Pod[] }>(['pods', '-l', selector]))?.items ?? [];

async function waitHoltReady(name: string, agents: number): Promise<void> {
  type Holt = { status?: { phase?: string; agents?: { total?: number; ready?: number } } };
  await until(
    `Holt ${name} Ready with ${agents} agents`,
    async () => {
      const h = await getJson<Holt>(['holt', name]);
      return h?.status?.phase === 'Ready' &&
        h.status.agents?.total === agents &&
        h.status.agents.ready === agents
        ? true
        : undefined;
    },
    420_000,
  );
}

/** examples/k8s/demo.yaml as it is, the Holt's workspace seeded from the in-cluster Git server. */
function demoManifests(): string {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'examples', 'k8s', 'demo.yaml'), 'utf8')).map(
    (d) =>
      d.toJS() as {
        kind: string;
        metadata: { labels?: Record<string, string> };
        spec?: Record<string, unknown>;
      },
  );
  for (const d of docs) {
    if (d.kind === 'Agent') d.metadata.labels = { ...d.metadata.labels, 'e2e.holt.io/holt': 'demo' };
    if (d.kind === 'Holt') {
      const spec = d.spec ?? {};
      // A bid later than the demo's 10 s counts as ignore; a loaded CI machine must not change the path.
      spec.orchestrator = { ...(spec.orchestrator as object), bidTimeoutSeconds: 120 };
      spec.workspace = {
        ...(spec.workspace as object),
        gitUrl: `http://git.${NS}.svc:8080/demo.git`,
        gitSecretRef: { name: GIT_SECRET },
      };
      d.spec = spec;
    }
  }
  return docs.map((d) => stringify(d)).join('---\n');
}

/**
 * Freezes the pup of an agent pod: SIGSTOP to the pup process (a child of tini, PID 1 of the
 * container; node names its main thread MainThread, so it is found by its command line).
 */
async function freezePup(pod: string): Promise<void> {
  const out = await kubectl([
    'exec',
    pod,
    '-c',
    'pup',
    '--',
    'sh',
    '-c',
    'for d in /proc/[0-9]*; do p=$(basename "$d"); [ "$p" = 1 ] || [ "$p" = $$ ] && continue; ' +
      'if tr "\\0" " " <$d/cmdline 2>/dev/null | grep -q "cli/main.js pup"; then kill -STOP "$p" && echo "stopped $p"; fi; done',
  ]);
  expect(out).toMatch(/stopped \d+/);
}
/** A Holt of one scalable agent whose tool takes a few seconds: backlog makes its pool scale out. */
function scaleManifests(workspace?: Record<string, string>): string {
  const result = JSON.stringify({
    artefact_type: 'Slept',
    artefact_payload: 'slept',
    summary: 'slept',
    structural_type: 'Terminal',
  });
  const label = { 'e2e.holt.io/holt': 'scale' };
  return [
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'scale' },
      spec: { orchestrator: { bidTimeoutSeconds: 120 }, ...(workspace ? { workspace } : {}) },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'scale-sleeper', labels: label },
      spec: {
        holt: 'scale',
        role: 'Sleeper',
        command: ['sh', '-c', `sleep 8; echo '${result}'`],
        bidding: { strategy: 'exclusive' },
        replicas: 3,
        workerPool: 'scale-sleeper-workers',
      },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'WorkerPool',
      metadata: { name: 'scale-sleeper-workers', labels: label },
      spec: {
        holt: 'scale',
        role: 'Sleeper',
        target: 'sleeper',
        terminationGracePeriodSeconds: 60,
        autoscaling: {
          minReplicas: 0,
          maxReplicas: 3,
          targetBacklogPerReplica: 1,
          cooldownSeconds: 15,
          stabilizationSeconds: 10,
        },
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
}

/**
 * A Holt whose one agent is the credential probe (e2e/probe), mounted from a ConfigMap into the
 * runtime image's agent container, with the Holt's store Services as targets.
 */
function trustManifests(): string {
  const cfg = {
    inline: true,
    targets: { redis: ['trust-redis:6379'], nats: ['trust-nats:4222'], postgres: ['trust-postgres:5432'] },
    pgModule: '/opt/holt/app/package.json',
  };
  const label = { 'e2e.holt.io/holt': 'trust' };
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'trust-probe', labels: label },
      data: {
        'credential-probe.mjs': readFileSync(join(ROOT, 'e2e', 'probe', 'credential-probe.mjs'), 'utf8'),
      },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'trust' },
      spec: { orchestrator: { bidTimeoutSeconds: 120 } },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'trust-prober', labels: label },
      spec: {
        holt: 'trust',
        role: 'Prober',
        command: ['node', '/probe/credential-probe.mjs', JSON.stringify(cfg)],
        bidding: { strategy: 'exclusive' },
        env: [{ name: 'DECLARED_FOR_TOOLS', value: 'visible' }],
        volumes: [{ name: 'probe', configMap: 'trust-probe', mountPath: '/probe' }],
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
}

/** `holt convert examples/demo-llm/holt.yml`, seeded from its Git repository, each agent on its own model. */
async function llmManifests(): Promise<string> {
  const { stdout } = await run(HOLT, ['convert', join(ROOT, 'examples', 'demo-llm', 'holt.yml')]);
  const docs = parseAllDocuments(stdout).map(
    (d) =>
      d.toJS() as {
        kind: string;
        metadata: { name: string; labels?: Record<string, string> };
        spec: Record<string, unknown>;
      },
  );
  for (const d of docs) {
    if (d.kind === 'Holt') {
      d.spec.workspace = {
        ...(d.spec.workspace as object),
        gitUrl: `http://git.${NS}.svc:8080/demo-llm.git`,
        gitSecretRef: { name: GIT_SECRET },
      };
      // The key would come from a Secret (apiKeySecretRef); the scripted server needs none.
      d.spec.llm = {};
    }
    if (d.kind === 'Agent') {
      d.metadata.labels = { ...d.metadata.labels, 'e2e.holt.io/holt': 'demo-llm' };
      const role = String(d.spec.role).toLowerCase();
      d.spec.llm = {
        ...(d.spec.llm as object),
        model: `scripted-${role}`,
        baseUrl: `http://llm.${NS}.svc:8080/v1`,
      };
      // The model server is a pod of the cluster (whose CIDRs no egress reaches): named by its labels.
      d.spec.egress = true;
      d.spec.egressTo = { pods: [{ labels: { app: 'llm' } }] };
    }
  }
  return docs.map((d) => stringify(d)).join('---\n');
}

/** What the living agent's model answers, in order: a work item, a timer, the tool, the report, two closings. */
const LIVING_SCRIPT: ScriptedReply[] = [
  call('work_create', { objective: 'Report on build 7 once it settles' }),
  call('wait', { for: 'timer', seconds: 45, on: 'build 7 to settle' }),
  call('lookup', { build: '7' }),
  { toolCalls: [{ name: 'work_complete', arguments: {} }], text: 'Build 7 is green: 212/212 tests passed.' },
  text('reported'),
  text('standing down'),
];

/** A Holt of one living agent with an ingress (exposed by an Ingress) and an asynchronous tool. */
function livingManifests(baseUrl: string): string {
  return [
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'living' },
      spec: { llm: {}, ingress: { expose: 'Ingress', host: 'agents.example.test' } },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'living-watcher', labels: { 'e2e.holt.io/holt': 'living' } },
      spec: {
        holt: 'living',
        role: 'Watcher',
        bidding: { strategy: 'ignore' },
        llm: {
          model: 'scripted-watcher',
          baseUrl,
          maxSteps: 6,
          tools: [
            {
              name: 'lookup',
              description: 'Look a build up (the build service answers).',
              parameters: { type: 'object', properties: { build: { type: 'string' } }, required: ['build'] },
              async: 'nats',
              asyncTimeoutSeconds: 120,
            },
          ],
        },
        ingress: { enabled: true, tokens: [{ name: 'ci' }, { name: 'ops', origin: 'operator' }] },
        egress: true,
        egressTo: { pods: [{ labels: { app: 'llm-life' } }] },
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
}

/** Issue 29's lifecycle tests: a Holt of their own in a namespace of their own, deleted at the end. */
const LIFE_NS = 'holt-e2e-life';

/** `holt --kube <ns>/<name> ...`: stdout, or the exit code and stderr when it fails. */
async function holtIn(
  ns: string,
  name: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(HOLT, ['--kube', `${ns}/${name}`, ...args], {
      env: { ...process.env, KUBECONFIG: c.kubeconfigPath, NO_COLOR: '1' },
      maxBuffer: 32 << 20,
      timeout: 300_000,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? 1, stdout: x.stdout ?? '', stderr: x.stderr ?? '' };
  }
}

/**
 * A Holt of two command agents with the short bid timeout a user might pick (5 s): a Writer that
 * writes the Terminal result (after ten minutes when the goal says "slow": a workflow still running),
 * and a Noter that bids ignore. Both must be up and bidding before the Holt is Ready.
 */
function lifeManifests(): string {
  const result = JSON.stringify({
    artefact_type: 'Written',
    artefact_payload: 'written',
    summary: 'written',
    structural_type: 'Terminal',
  });
  return [
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'life' },
      spec: { orchestrator: { bidTimeoutSeconds: 5 } },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'life-writer' },
      spec: {
        holt: 'life',
        role: 'Writer',
        command: ['sh', '-c', `in=$(cat); case "$in" in *slow*) sleep 600;; esac; echo '${result}'`],
        bidding: { strategy: 'exclusive' },
      },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'life-noter' },
      spec: {
        holt: 'life',
        role: 'Noter',
        command: ['sh', '-c', 'echo noted'],
        bidding: { strategy: 'ignore' },
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
}

beforeAll(async () => {
  c = await e2eTarget(Number(process.env.HOLT_E2E_NODES ?? 2), progress);
  await c.kubectl(['create', 'namespace', NS]);
  await c.kubectl(['create', 'namespace', LIFE_NS]);
  progress('helm install holt-operator');
  await c.helm([
    'install',
    'holt-operator',
    join(ROOT, 'charts', 'holt-operator'),
    '-n',
    'holt-system',
    '--create-namespace',
    '--set',
    // LIFE_NS: a namespace of its own for the lifecycle tests, which end by deleting it.
    `watchNamespaces={${NS},${LIFE_NS}}`,
    '--wait',
    '--timeout',
    '5m',
  ]);
  const llmDemo = join(ROOT, 'examples', 'demo-llm');
  const seedLlm = Object.fromEntries(
    ['holt.yml', 'agents/bid-on.mjs', 'agents/lib.mjs'].map((f) => [
      f,
      readFileSync(join(llmDemo, f), 'utf8'),
    ]),
  );
  await kubectl(
    ['apply', '-f', '-'],
    gitServer(randomBytes(12).toString('hex'), { demo: {}, 'demo-llm': seedLlm }),
  );
  // The script five times over: the LLM test runs it once; the dashboard picture runs it again.
  await kubectl(['apply', '-f', '-'], llmServer(Array(5).fill(DEMO_LLM_SCRIPT).flat()));
  await kubectl(['rollout', 'status', 'deploy/git', '--timeout=180s']);
  await kubectl(['rollout', 'status', 'deploy/llm', '--timeout=180s']);
  // Scrapes every pod that carries the scrape hints, from now to the end of the run (the project's own
  // cluster loads the Prometheus image; another cluster skips the metrics test).
  if (c.local) {
    await c.kubectl(['create', 'namespace', MONITORING_NS]);
    await c.kubectl(['apply', '-f', '-'], { input: prometheusManifests() });
    await c.kubectl(['-n', MONITORING_NS, 'rollout', 'status', 'deploy/prometheus', '--timeout=180s']);
  }
}, 900_000);

afterAll(async () => {
  if (c) {
    await c.helm(['uninstall', 'holt-operator', '-n', 'holt-system']).catch(() => {});
    await c.kubectl(['delete', 'namespace', NS, '--wait=false'], { allowFail: true }).catch(() => {});
    await c.stop();
  }
}, 300_000);

describe('Holt on a real cluster (real kubelet, containers from the built images)', () => {
  it('helm install: the operator pod is Ready through its probes, as the built image', async () => {
    const op = (await c.kubectl(['-n', 'holt-system', 'get', 'pods', '-o', 'json'])) as string;
    const items = (
      JSON.parse(op) as {
        items: (Pod & { spec: { containers: { image: string; readinessProbe?: object }[] } })[];
      }
    ).items;
    expect(items).toHaveLength(1);
    expect(items[0]!.spec.containers[0]!.image).toBe(`ghcr.io/holt-k8s/operator:${VERSION}`);
    expect(items[0]!.spec.containers[0]!.readinessProbe).toBeDefined();
    expect(items[0]!.status.containerStatuses?.[0]?.ready).toBe(true);
    // Its rights on this cluster: the watched namespace only, and Secrets by name, never listed.
    const canI = async (...args: string[]) =>
      (
        await c.kubectlResult(
          ['auth', 'can-i', ...args, '--as=system:serviceaccount:holt-system:holt-operator'],
          {
            allowFail: true,
          },
        )
      ).stdout.trim();
    expect(await canI('get', 'secrets', '-n', NS)).toBe('yes');
    expect(await canI('create', 'deployments.apps', '-n', NS)).toBe('yes');
    expect(await canI('list', 'secrets', '-n', NS)).toBe('no');
    expect(await canI('watch', 'secrets', '-n', NS)).toBe('no');
    expect(await canI('get', 'secrets', '-n', 'kube-system')).toBe('no');
    expect(await canI('create', 'deployments.apps', '-n', 'default')).toBe('no');
    expect(await canI('create', 'pods', '-n', NS)).toBe('no');
  });

  it('issue 29: a goal posted the moment `kubectl wait` says a brand-new Holt is Ready finishes', async () => {
    await c.kubectl(['-n', LIFE_NS, 'apply', '-f', '-'], { input: lifeManifests() });
    // Ready means every Agent's pup is up and bidding: a goal posted now is never closed unheard.
    // kubectl's own timeout stays under the harness's 2 min per command: it is asked again until it returns.
    await until(
      'kubectl wait --for=condition=Ready holt/life',
      async () =>
        (
          await c.kubectlResult(
            ['-n', LIFE_NS, 'wait', '--for=condition=Ready', 'holt/life', '--timeout=100s'],
            {
              allowFail: true,
            },
          )
        ).code === 0 || undefined,
      420_000,
    );
    progress('life Ready; posting the goal at once');
    const r = await holtIn(LIFE_NS, 'life', ['forage', '--goal', 'write it', '--watch']);
    expect(r.stdout).toContain('Workflow completed');
    const st = await holtIn(LIFE_NS, 'life', ['status']);
    expect(st.stdout).not.toContain('Dormant claims');
  }, 600_000);

  it("issue 29: a goal posted while an agent's pod is being replaced finishes once the pod is back", async () => {
    const writer = (
      JSON.parse(
        await c.kubectl([
          '-n',
          LIFE_NS,
          'get',
          'pods',
          '-l',
          'holt.io/instance=life,holt.io/role=Writer',
          '-o',
          'json',
        ]),
      ) as { items: Pod[] }
    ).items[0]!;
    await c.kubectl(['-n', LIFE_NS, 'delete', 'pod', writer.metadata.name, '--wait=false']);
    progress(`deleted ${writer.metadata.name}; posting the goal`);
    // The Writer is silent while its new pod starts: the claim may go dormant (5 s bid timeout) and is
    // re-opened by the new pup's bid, or the new pup bids in time. Either way the workflow finishes.
    const r = await holtIn(LIFE_NS, 'life', ['forage', '--goal', 'write it again', '--watch']);
    expect(r.stdout).toContain('Workflow completed');
  }, 600_000);

  it('issue 29: a Holt in a namespace the operator does not watch: holt status says so', async () => {
    const ns = 'holt-e2e-unwatched';
    await c.kubectl(['create', 'namespace', ns]);
    try {
      await c.kubectl(['-n', ns, 'apply', '-f', '-'], {
        input: stringify({
          apiVersion: 'holt.io/v1alpha1',
          kind: 'Holt',
          metadata: { name: 'lost' },
          spec: {},
        }),
      });
      const r = await holtIn(ns, 'lost', ['status']);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`namespace ${ns} is not watched`);
      expect(r.stderr).toContain('holt-system/holt-operator watches');
    } finally {
      await c.kubectl(['delete', 'namespace', ns, '--wait=false']);
    }
  }, 120_000);

  it('issue 29: deleting the namespace of a Holt with a workflow running: it is gone within a minute', async () => {
    await holtIn(LIFE_NS, 'life', ['forage', '--goal', 'slow work']);
    await until(
      'the slow goal granted to the Writer',
      async () => {
        const st = await holtIn(LIFE_NS, 'life', ['status', '--json']);
        const claims = (JSON.parse(st.stdout || '{}') as { claims?: Record<string, number> }).claims ?? {};
        return (claims.pending_exclusive ?? 0) > 0 ? true : undefined;
      },
      180_000,
    );
    progress(`deleting namespace ${LIFE_NS}`);
    await c.kubectl(['delete', 'namespace', LIFE_NS, '--wait=false']);
    // The bound is the requirement: nothing (an Agent's finalizer the operator can no longer remove
    // once its RoleBinding is gone) may hold the namespace in Terminating.
    const gone = await eventually(
      `namespace ${LIFE_NS} gone`,
      async () =>
        (await c.kubectlResult(['get', 'namespace', LIFE_NS], { allowFail: true })).code !== 0
          ? true
          : undefined,
      {
        timeoutMs: 60_000,
        intervalMs: 1000,
        describe: async () =>
          (
            await c.kubectlResult(
              [
                '-n',
                LIFE_NS,
                'get',
                'holts,agents,pods,pvc,statefulsets',
                '-o',
                'custom-columns=KIND:.kind,NAME:.metadata.name,FINALIZERS:.metadata.finalizers,DELETED:.metadata.deletionTimestamp',
              ],
              { allowFail: true },
            )
          ).stdout,
      },
    );
    expect(gone).toBe(true);
  }, 300_000);

  it('the demo: seeded from gitUrl, a frozen pup restarted by its liveness probe, the workflow finished', async () => {
    await kubectl(['apply', '-f', '-'], demoManifests());
    await waitHoltReady('demo', 5);
    progress('demo Ready');
    // Every pod that mounts the workspace sits on one node (a ReadWriteOnce volume).
    const withWorkspace = (await pods('holt.io/instance=demo')).filter((p) =>
      p.spec.volumes?.some((v) => v.persistentVolumeClaim?.claimName === 'demo-workspace'),
    );
    expect(withWorkspace.length).toBeGreaterThanOrEqual(5);
    expect(new Set(withWorkspace.map((p) => p.spec.nodeName)).size).toBe(1);

    const drafter = (await pods('holt.io/instance=demo,holt.io/role=Drafter'))[0]!;
    await freezePup(drafter.metadata.name);
    progress(`froze ${drafter.metadata.name}; posting the goal`);
    const out = await holt('demo', ['forage', '--goal', 'publish a plan', '--watch']);
    expect(out).toContain('Workflow completed');
    const restarted = (await pods('holt.io/instance=demo,holt.io/role=Drafter')).find(
      (p) => p.metadata.name === drafter.metadata.name,
    );
    expect(restarted?.status.containerStatuses?.[0]?.restartCount).toBeGreaterThanOrEqual(1);

    const publisher = (await pods('holt.io/instance=demo,holt.io/role=Publisher'))[0]!;
    const git = (...args: string[]) =>
      kubectl(['exec', publisher.metadata.name, '--', 'git', '-C', '/workspace', ...args]);
    const trail = await trailOf('demo');
    const head = (await git('log', '--format=%H %s', '-1')).trim();
    const show = (await git('show', 'HEAD:docs/plan.md')).trim();
    const seed = (await git('log', '--format=%s', '--reverse')).trim().split('\n')[0];
    expectDemoTrail(trail, (...a) => (a[0] === 'show' ? show : head));
    // The Publisher's commit sits on the seed commit cloned from the Git server.
    expect(seed).toBe('seed');
  }, 900_000);

  it('a scalable agent: its WorkerPool runs more than one worker pod on backlog, scales back, kills no busy worker', async () => {
    // Where the cluster has a ReadWriteMany class (the local one's `shared`), the workspace is one, so the
    // workers are free to spread over the nodes, and should.
    const rwx = (await c.kubectlResult(['get', 'storageclass', 'shared'], { allowFail: true })).code === 0;
    const nodeCount = JSON.parse(await c.kubectl(['get', 'nodes', '-o', 'json'])).items.length as number;
    await kubectl(
      ['apply', '-f', '-'],
      scaleManifests(rwx ? { accessMode: 'ReadWriteMany', storageClassName: 'shared' } : undefined),
    );
    await waitHoltReady('scale', 1);
    const goals = 6;
    for (let i = 0; i < goals; i++) await holt('scale', ['forage', '--goal', `sleep ${i}`]);
    progress(`${goals} goals posted to scale`);
    type Pool = { status?: { replicas?: number; desiredReplicas?: number; backlog?: number } };
    type AgentSt = { status?: { claimsInFlight?: number; conditions?: { type: string; message: string }[] } };
    const agentSt = () => getJson<AgentSt>(['agent', 'scale-sleeper']);
    // The Agent's claimsInFlight: counted by the orchestrator, read by the operator as its own Redis
    // user (which may read no claim): the backlog shows there while the workers run.
    await until('the Agent to show claims in flight', async () =>
      ((await agentSt())?.status?.claimsInFlight ?? 0) > 0 ? true : undefined,
    );
    let peak = 0;
    const workerNodes = new Set<string>();
    // A ReadWriteMany workspace: the workers' preferred anti-affinity puts them on different nodes. A
    // preference, so the first two may share one; the pool keeps growing on backlog and spreads.
    const spread = rwx && nodeCount > 1;
    await until(`more than one worker pod running${spread ? ', on more than one node' : ''}`, async () => {
      const running = (await pods('holt.io/instance=scale,app.kubernetes.io/component=worker')).filter(
        (p) => p.status.phase === 'Running' && !p.metadata.deletionTimestamp,
      );
      peak = Math.max(peak, running.length);
      for (const p of running) if (p.spec.nodeName) workerNodes.add(p.spec.nodeName);
      return peak > 1 && (!spread || workerNodes.size > 1) ? true : undefined;
    });
    if (spread) expect(workerNodes.size).toBeGreaterThan(1);
    await until(
      `the ${goals} workflows of scale to finish`,
      async () => {
        const done = (await trailOf('scale')).filter((a) => a.structural_type === 'Terminal').length;
        return done === goals ? true : undefined;
      },
      600_000,
    );
    await until('the pool to scale back to zero', async () => {
      const pool = await getJson<Pool>(['workerpool', 'scale-sleeper-workers']);
      const left = await pods('holt.io/instance=scale,app.kubernetes.io/component=worker');
      return pool?.status?.replicas === 0 && left.length === 0 ? true : undefined;
    });
    await until('the Agent to show no claim in flight, refreshed', async () => {
      const st = (await agentSt())?.status;
      const ready = st?.conditions?.find((k) => k.type === 'Ready');
      return st?.claimsInFlight === 0 && ready && !ready.message.includes('not refreshed') ? true : undefined;
    });
    // Every claim ran once, in one attempt: no worker was stopped while it held a row.
    const rows = await kubectl([
      'exec',
      'scale-postgres-0',
      '--',
      'psql',
      '-U',
      'holt',
      '-d',
      'holt',
      '-At',
      '-c',
      "SELECT status || ':' || attempts FROM holt.agent_inbox WHERE instance = 'scale' ORDER BY id",
    ]);
    expect(rows.trim().split('\n')).toEqual(Array(goals).fill('done:1'));
    const trail = await trailOf('scale');
    expect(trail.filter((a) => a.structural_type === 'Failure')).toEqual([]);
    progress(`scale: peak ${peak} worker pods on ${[...workerNodes].join(', ')}`);
  }, 900_000);

  it('R5: the orchestrator pod and a busy worker pod killed mid-workflow (no grace): every workflow finishes, one result each', async () => {
    const before = (await trailOf('scale')).filter((a) => a.structural_type === 'Terminal').length;
    const goals = 3;
    for (let i = 0; i < goals; i++) await holt('scale', ['forage', '--goal', `drill ${i}`]);
    const psql = (sql: string) =>
      kubectl(['exec', 'scale-postgres-0', '--', 'psql', '-U', 'holt', '-d', 'holt', '-At', '-c', sql]);
    // A worker holds a row (its tool sleeps 8 s): kill it and the orchestrator, as a node crash would.
    // The row and the pods are read together: a row can be held by a worker pod already on its way out
    // (the previous test's scale-down), while the next worker pod is still starting.
    const running = (sel: string) =>
      pods(sel).then((ps) => ps.filter((p) => p.status.phase === 'Running' && !p.metadata.deletionTimestamp));
    const { orch, worker } = await until('a running worker pod, and a worker running a claim', async () => {
      const claimed = (
        await psql("SELECT count(*) FROM holt.agent_inbox WHERE instance = 'scale' AND status = 'claimed'")
      ).trim();
      const [o] = await running('holt.io/instance=scale,app.kubernetes.io/component=orchestrator');
      const [w] = await running('holt.io/instance=scale,app.kubernetes.io/component=worker');
      return claimed !== '0' && o && w ? { orch: o, worker: w } : undefined;
    });
    const t0 = Date.now();
    await kubectl([
      'delete',
      'pod',
      orch.metadata.name,
      worker.metadata.name,
      '--grace-period=0',
      '--force',
      '--wait=false',
    ]);
    progress(`R5: killed ${orch.metadata.name} and ${worker.metadata.name}`);
    await until(
      `the ${goals} drill workflows to finish`,
      async () => {
        const done = (await trailOf('scale')).filter((a) => a.structural_type === 'Terminal').length;
        return done >= before + goals ? true : undefined;
      },
      600_000,
    );
    progress(`R5: all finished ${Math.round((Date.now() - t0) / 1000)} s after the kills`);
    const trail = await trailOf('scale');
    // One result per claim: each drill goal has exactly one Terminal, and nothing failed.
    for (let i = 0; i < goals; i++) {
      const goal = trail.find((a) => a.type === 'GoalDefined' && a.payload === `drill ${i}`);
      expect(
        trail.filter((a) => a.structural_type === 'Terminal' && a.source_artefacts.includes(goal?.id ?? '')),
      ).toHaveLength(1);
    }
    expect(trail.filter((a) => a.structural_type === 'Failure')).toEqual([]);
    expect((await psql("SELECT DISTINCT status FROM holt.agent_inbox WHERE instance = 'scale'")).trim()).toBe(
      'done',
    );
  }, 900_000);

  it("a worker's pup killed mid-claim (exit 137): the operator reports it with its last log lines, the claim is taken back at once and finishes", async () => {
    const psql = (sql: string) =>
      kubectl(['exec', 'scale-postgres-0', '--', 'psql', '-U', 'holt', '-d', 'holt', '-At', '-c', sql]);
    await holt('scale', ['forage', '--goal', 'die once']);
    const held = await until('a worker holding the claim', async () => {
      const r = (
        await psql(
          "SELECT id || ' ' || lease_owner FROM holt.agent_inbox WHERE instance = 'scale' AND status = 'claimed' LIMIT 1",
        )
      ).trim();
      return r || undefined;
    });
    const [rowId, owner] = held.split(' ') as [string, string];
    // As an out-of-memory kill would: the pup (not the tools) dies at once, holding the row.
    await c.kubectlResult(['-n', NS, 'exec', owner, '-c', 'pup', '--', 'sh', '-c', 'kill -9 -1'], {
      allowFail: true,
    });
    progress(`worker exit: killed the pup of ${owner} holding inbox row ${rowId}`);
    await until(
      'the claim to finish on its second try',
      async () =>
        (await psql(`SELECT status FROM holt.agent_inbox WHERE id = ${rowId}`)).trim() === 'done'
          ? true
          : undefined,
      300_000,
    );
    const row = (
      await psql(
        `SELECT attempts || '|' || last_error || '|' || (worker_exit->>'owner') || '|' || (worker_exit->>'exit_code') || '|' || ((worker_exit->>'logs') LIKE '%"component":"pup"%') FROM holt.agent_inbox WHERE id = ${rowId}`,
      )
    ).trim();
    expect(row).toBe(`2|worker exited with code 137|${owner}|137|true`);
    const trail = await trailOf('scale');
    const goal = trail.find((a) => a.type === 'GoalDefined' && a.payload === 'die once');
    expect(
      trail.filter((a) => a.structural_type === 'Terminal' && a.source_artefacts.includes(goal?.id ?? '')),
    ).toHaveLength(1);
    // Holt's image audit: the digest the controller pod runs its tools from, in agent_images and on the grant.
    type Statuses = { status?: { initContainerStatuses?: { name: string; imageID?: string }[] } };
    const [controller] = await pods('holt.io/instance=scale,app.kubernetes.io/component=controller');
    const st = await getJson<Statuses>(['pod', controller?.metadata.name ?? 'none']);
    const imageId = st?.status?.initContainerStatuses?.find((x) => x.name === 'agent')?.imageID;
    expect(imageId).toMatch(/sha256:[0-9a-f]{64}$/);
    const redis = async (...args: string[]) =>
      (
        await kubectl([
          'exec',
          'scale-redis-0',
          '--',
          'redis-cli',
          '--user',
          'admin',
          '--no-auth-warning',
          ...args,
        ])
      ).trim();
    expect(await redis('HGET', 'holt:scale:agent_images', 'Sleeper')).toBe(imageId);
    const claimId = await redis('GET', `holt:scale:claim_by_artefact:${goal?.id}`);
    expect(await redis('HGET', `holt:scale:claim:${claimId}`, 'granted_agent_image_id')).toBe(imageId);
  }, 600_000);

  it('an LLM Agent with its own model and baseUrl, from `holt convert`, finishes its turns against the scripted model pod', async () => {
    await kubectl(['apply', '-f', '-'], await llmManifests());
    await waitHoltReady('demo-llm', 3);
    const out = await holt('demo-llm', ['forage', '--goal', 'Plan a CHANGELOG', '--watch']);
    expect(out).toContain('Workflow completed');
    const trail = await trailOf('demo-llm');
    expect(trail.map((a) => a.type)).toEqual(['GoalDefined', 'Draft', 'Review', 'WorkflowComplete']);
    expect(trail.find((a) => a.type === 'Draft')?.payload).toBe(PLAN);
    // Each agent asked for its own model at the scripted server.
    const logs = await kubectl(['logs', 'deploy/llm']);
    const models = logs
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => (JSON.parse(l) as { model: string }).model);
    expect(new Set(models)).toEqual(new Set(['scripted-writer', 'scripted-reviewer', 'scripted-finisher']));
  }, 900_000);

  it('a living agent: a curl with its token queues a message; a work item, a timer (its pod killed mid-wait), a tool answered over NATS, the item completed; labels at each step', async () => {
    const base = `http://llm-life.${NS}.svc:8080/v1`;
    await kubectl(['apply', '-f', '-'], llmServer(LIVING_SCRIPT, 'llm-life'));
    await kubectl(['apply', '-f', '-'], livingManifests(base));
    await kubectl(['apply', '-f', '-'], toolService('living', 'lookup'));
    await waitHoltReady('living', 1);
    await kubectl(['rollout', 'status', 'deploy/llm-life', '--timeout=180s']);
    await kubectl(['rollout', 'status', 'deploy/builds', '--timeout=180s']);
    const secret = async (name: string) => {
      const d = await getJson<{ data: Record<string, string> }>(['secret', name]);
      return Buffer.from(d?.data.token ?? '', 'base64').toString('utf8');
    };
    const ci = await until(
      'the ci token',
      async () => (await secret('living-watcher-ingress-ci')) || undefined,
    );
    const ops = await secret('living-watcher-ingress-ops');
    const send = async (key: string, body: string, token = ci): Promise<number> => {
      if (!c.local) {
        // Another cluster: the CLI's way in (the API server's port-forward to the orchestrator).
        await holt('living', ['send', 'Watcher', JSON.parse(body).text, '--token', token, '--key', key]);
        return 202;
      }
      // An outside client: curl from a node's network namespace to the orchestrator's ingress port.
      const orch = (await pods('holt.io/instance=living,app.kubernetes.io/component=orchestrator')).find(
        (p) => p.status.phase === 'Running',
      ) as (Pod & { status: { podIP?: string } }) | undefined;
      const { stdout } = await run('nsenter', [
        `--net=/run/netns/${c.local.nodes[0]!.plan.netns}`,
        '--',
        'curl',
        '-sS',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '-X',
        'POST',
        '-H',
        `Authorization: Bearer ${token}`,
        '-H',
        `Idempotency-Key: ${key}`,
        '-H',
        'Content-Type: application/json',
        '--data',
        body,
        `http://${orch?.status.podIP}:8090/v1/agents/Watcher/messages`,
      ]);
      return Number(stdout);
    };
    // The orchestrator may have started before its token file existed: the kubelet brings it (≤ a minute).
    await until('the message queued (202)', async () =>
      (await send('build-7', JSON.stringify({ text: 'Build 7 started; tell us how it ends.' }))) === 202
        ? true
        : undefined,
    );
    if (c.local) expect(await send('build-7', JSON.stringify({ text: 'again' }))).toBe(200);
    type AgentSt = {
      status?: {
        life?: { state: string; items: { waiting: number; completed: number }; lastMessageTime?: string };
        ingress?: { tokens: { name: string; present: boolean }[] };
      };
    };
    const watcher = () => getJson<AgentSt>(['agent', 'living-watcher']);
    // Asleep on its timer: its pod is killed (no grace), and a new one takes over the wait.
    await until('the item waits on its timer', async () =>
      ((await watcher())?.status?.life?.items.waiting ?? 0) === 1 ? true : undefined,
    );
    const [first] = await pods('holt.io/instance=living,holt.io/role=Watcher');
    await kubectl(['delete', 'pod', first!.metadata.name, '--grace-period=0', '--force']);
    const done = await until(
      'the item completed',
      async () => {
        const w = await watcher();
        return (w?.status?.life?.items.completed ?? 0) === 1 ? w : undefined;
      },
      420_000,
    );
    expect(done.status?.life?.state).toBe('running');
    expect(done.status?.life?.lastMessageTime).toBeTruthy();
    expect(done.status?.ingress?.tokens).toEqual([
      { name: 'ci', secretName: 'living-watcher-ingress-ci', present: true },
      { name: 'ops', secretName: 'living-watcher-ingress-ops', present: true },
    ]);
    const after = await pods('holt.io/instance=living,holt.io/role=Watcher');
    expect(after.map((p) => p.metadata.name)).not.toContain(first!.metadata.name);
    // The operator's token: an instruction, through the CLI's way in.
    await holt('living', ['send', 'Watcher', 'Stand down for today.', '--token', ops]);
    // What the model was shown, in order (the scripted server logs each request).
    const shown = await until('six model calls', async () => {
      const lines = (await kubectl(['logs', 'deploy/llm-life']))
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { user: string; last: string });
      return lines.length >= 6 ? lines : undefined;
    });
    expect(shown[0]!.user).toContain(
      '<message origin="webhook" surface="POST /v1/agents/Watcher/messages" admission="token ci" authority="external_evidence"',
    );
    expect(shown[2]!.user).toContain('origin="timer"');
    // The tool's requests are per instance (cmd.tool.<holt>.<tool>); its answer came on the call's own reply subject.
    expect(shown[3]!.last).toContain(
      'origin="task" surface="cmd.tool.living.lookup" admission="tool service"',
    );
    expect(shown[3]!.last).toContain('build 7: green');
    expect(shown[5]!.user).toContain('origin="operator"');
    expect(shown[5]!.user).toContain('authority="operator_instruction"');
    const answered = await kubectl(['logs', 'deploy/builds']);
    expect(answered).toContain('"tool":"lookup","build":"7"');
    // The exposure asked for: an Ingress in front of the ingress port.
    const ing = await getJson<{ spec: { rules: { host: string }[] } }>(['ingress', 'living-ingress']);
    expect(ing?.spec.rules[0]?.host).toBe('agents.example.test');
  }, 900_000);

  it('metrics, for real: an in-cluster Prometheus scrapes the Holts and the operator by their scrape hints; every dashboard panel has data, every alert evaluates', async (ctx) => {
    if (!c.local)
      return notApplicable(
        ctx,
        "the Prometheus image is loaded only on the project's own cluster (make cluster-up)",
      );
    // Asked from inside a node's network namespace (where pod addresses route), as another pod would.
    const promPod = JSON.parse(
      await c.kubectl(['-n', MONITORING_NS, 'get', 'pods', '-l', 'app=prometheus', '-o', 'json']),
    ) as { items: { status: { podIP?: string } }[] };
    const ip = promPod.items[0]?.status.podIP;
    expect(ip).toBeTruthy();
    const netns = c.local.nodes[0]!.plan.netns;
    const query = async (q: string, path = 'query', extra: Record<string, string> = {}) => {
      const url = `http://${ip}:9090${prometheusApi(path, { query: q, ...extra })}`;
      const { stdout } = await run('nsenter', [
        `--net=/run/netns/${netns}`,
        '--',
        process.execPath,
        '-e',
        `fetch(${JSON.stringify(url)}).then((r) => r.text()).then((t) => process.stdout.write(t))`,
      ]);
      const r = JSON.parse(stdout) as PromVector;
      expect(r.status, q).toBe('success');
      return r.data.result;
    };
    // The Holts' orchestrators and pups, and the operator, found and scraped through their annotations.
    const holts = await until('the Holts and the operator scraped', async () => {
      const up = await query('count by (holt_io_instance, namespace) (up == 1)');
      const found = up.map((r) => r.metric.holt_io_instance ?? `ns:${r.metric.namespace}`);
      return ['demo', 'scale', 'demo-llm', 'ns:holt-system'].every((h) => found.includes(h))
        ? found
        : undefined;
    });
    progress(`scraped: ${holts.join(', ')}`);
    const roles = (await query('count by (holt_io_role) (holt_pup_bids_total)')).map(
      (r) => r.metric.holt_io_role,
    );
    expect(roles).toEqual(expect.arrayContaining(['Drafter', 'Reviewer']));
    const files = join(ROOT, 'charts', 'holt-operator', 'files');
    const dashboard = JSON.parse(readFileSync(join(files, 'dashboard.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string; legendFormat: string }[] }[];
    };
    const ns = (expr: string) => expr.replaceAll('$namespace', '.+');
    // Rates need two scrapes after the work: asked again until every panel has data.
    let empty: string[] = [];
    await until(
      'every dashboard panel to have data',
      async () => {
        empty = [];
        for (const p of dashboard.panels) {
          const results = await Promise.all(p.targets.map((t) => query(ns(t.expr))));
          if (!results.some((r) => r.length > 0)) empty.push(p.title);
        }
        return empty.length ? undefined : true;
      },
      120_000,
    ).catch(async (e: unknown) => {
      const seen = await query('count by (pod, __name__) ({__name__=~"holt_llm.*"})');
      progress(`empty panels: ${empty.join(', ')}; LLM series: ${JSON.stringify(seen.map((r) => r.metric))}`);
      throw e;
    });
    const alerts = parseAllDocuments(readFileSync(join(files, 'alerts.yaml'), 'utf8'))[0]?.toJS() as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    for (const r of alerts.groups.flatMap((g) => g.rules)) await query(r.expr);
    // The figures behind the README's dashboard picture (scripts/dashboard-picture.ts renders them).
    const out = process.env.HOLT_DASHBOARD_OUT;
    if (out) {
      // A picture wants work spread over scrapes: four more LLM workflows and worker goals, 30 s apart.
      for (let i = 1; i <= 4; i++) {
        await holt('demo-llm', ['forage', '--goal', `Plan a CHANGELOG, take ${i}`, '--watch']);
        for (let g = 0; g < 3; g++) await holt('scale', ['forage', '--goal', `sleep ${i}.${g}`]);
        await new Promise((r) => setTimeout(r, 30_000));
      }
      const end = Math.floor(Date.now() / 1000);
      const range = { start: String(end - 900), end: String(end), step: '15' };
      const panels = [];
      for (const p of dashboard.panels)
        panels.push({
          title: p.title,
          series: (
            await Promise.all(
              p.targets.map(async (t) => ({ t, r: await query(ns(t.expr), 'query_range', range) })),
            )
          ).flatMap(({ t, r }) =>
            r.map((x) => ({
              legend: t.legendFormat.replace(/\{\{(\w+)\}\}/g, (_, k: string) => x.metric[k] ?? ''),
              values: x.values ?? [],
            })),
          ),
        });
      writeFileSync(out, `${JSON.stringify({ taken_at: new Date().toISOString(), panels })}\n`);
      progress(`dashboard figures written to ${out}`);
    }
  }, 900_000);

  it('trust boundary: a hostile tool in the agent container finds no credential and no store lets it in', async () => {
    await kubectl(['apply', '-f', '-'], trustManifests());
    await waitHoltReady('trust', 1);
    const out = await holt('trust', ['forage', '--goal', 'look around', '--watch']);
    expect(out).toContain('Workflow completed');
    const art = (await trailOf('trust')).find((a) => a.type === 'ProbeReport');
    const report = JSON.parse(art?.payload ?? '{}') as {
      texts: string;
      seen: { environ: number; cmdline: number };
      attempts: { store: string; ok: boolean }[];
    };
    // Every credential of the Holt: each principal's password on every store (and the superuser's).
    const secrets: string[] = [];
    for (const s of ['trust-redis', 'trust-nats', 'trust-postgres-app']) {
      const data = (await getJson<{ data: Record<string, string> }>(['secret', s]))?.data ?? {};
      for (const [k, v] of Object.entries(data))
        if (k.endsWith('password')) secrets.push(Buffer.from(v, 'base64').toString());
    }
    // Redis and NATS: admin, orchestrator, pup, operator, tool; Postgres: superuser, owner, orchestrator,
    // pup, operator.
    expect(secrets.length).toBe(5 + 5 + 5);
    expect(report.texts).toContain('HOLT_AGENT_NAME=Prober');
    expect(report.texts).toContain('DECLARED_FOR_TOOLS=visible');
    expect(report.texts).toMatch(/HOLT_CALL_ID=[0-9a-f-]{36}/);
    // Its own container only: the runner is there, the pup (another container, another PID namespace) is not.
    expect(report.texts).toContain('tool-runner');
    expect(report.texts).not.toContain('HOLT_TOOL_RUNNER_SOCKET');
    for (const secret of secrets) expect(report.texts).not.toContain(secret);
    // The report travels as an artefact, which the pup scrubs of what it holds: a found pup password
    // would arrive as this mark, never as itself.
    expect(report.texts).not.toContain('[redacted]');
    expect(report.seen.environ).toBeGreaterThan(1);
    expect(new Set(report.attempts.map((a) => a.store))).toEqual(new Set(['redis', 'nats', 'postgres']));
    expect(report.attempts.filter((a) => a.ok)).toEqual([]);
  }, 600_000);

  it('trust boundary: a tool that plants fsmonitor, uploadpack, a filter and hooks in .git and returns ":README" gets a Failure; nothing it planted runs in the pup or the runner', async () => {
    // One agent on the trust Holt's stores at a time: the prober steps aside and comes back after.
    await kubectl(['delete', 'agent', 'trust-prober', '--wait=true']);
    const label = { 'e2e.holt.io/holt': 'trust' };
    const onGoals =
      "let s='';process.stdin.on('data',(d)=>{s+=d}).on('end',()=>process.stdout.write(JSON.parse(s).type==='GoalDefined'?'exclusive':'ignore'))";
    const manifests = [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'trust-plant', labels: label },
        data: {
          'git-plant.mjs': readFileSync(join(ROOT, 'test', 'fixtures', 'agents', 'git-plant.mjs'), 'utf8'),
        },
      },
      {
        apiVersion: 'holt.io/v1alpha1',
        kind: 'Agent',
        metadata: { name: 'trust-planter', labels: label },
        spec: {
          holt: 'trust',
          role: 'Planter',
          command: ['node', '/plant/git-plant.mjs', 'goal'],
          bidding: { script: ['node', '-e', onGoals] },
          workspace: { mode: 'rw' },
          volumes: [{ name: 'plant', configMap: 'trust-plant', mountPath: '/plant' }],
        },
      },
    ];
    await kubectl(['apply', '-f', '-'], manifests.map((d) => stringify(d)).join('---\n'));
    try {
      await waitHoltReady('trust', 1);
      /** The Planter's artefact made of the goal `mode` (the fixture takes its mode from the goal). */
      const made = async (mode: string) => {
        await holt('trust', ['forage', '--goal', mode]);
        return until(`the Planter's artefact for ${mode}`, async () => {
          const all = await trailOf('trust');
          const g = all.find((a) => a.type === 'GoalDefined' && a.payload === mode);
          return g && all.find((a) => a.source_artefacts.includes(g.id) && a.produced_by_role === 'Planter');
        });
      };
      const good = await made('head');
      expect(good).toMatchObject({ type: 'CodeCommit', payload: expect.stringMatching(/^[0-9a-f]{40}$/) });
      const failed = await made('name');
      expect(failed).toMatchObject({ structural_type: 'Failure', type: 'ToolExecutionFailure' });
      expect(JSON.parse(failed.payload).reason).toMatch(
        /git commit validation failed for ":README": not a full commit id/,
      );
      // The tool's own look at .git: the dump no plant ever wrote, and its naive `git status` (the
      // control) runs the plant, so it was armed the whole time.
      const report = await made('report');
      expect(report.type).toBe('PlantReport');
      expect(report.payload).not.toContain('[redacted]');
      expect(JSON.parse(report.payload)).toEqual({ dump: null, control: true });
    } finally {
      await kubectl(['delete', 'agent', 'trust-planter', '--wait=true']).catch(() => undefined);
      await kubectl(['apply', '-f', '-'], trustManifests());
    }
  }, 600_000);

  it('network policies, enforced (kube-router on every node): an egress agent reaches what its Agent declares, not the API server, not the metadata address, not another pod', async () => {
    const local = c.local;
    // A stand-in for the cloud metadata service, inside each node's own namespace (the pods' gateway).
    const metadata = (local?.nodes ?? []).map((n) => {
      const ip = (...a: string[]) => run('ip', ['-n', n.plan.netns, ...a]);
      return {
        add: async () => {
          await ip('addr', 'add', '169.254.169.254/32', 'dev', 'lo');
          return spawnServer({
            name: `${n.plan.name}-metadata`,
            command: 'nsenter',
            args: [
              `--net=/run/netns/${n.plan.netns}`,
              '--',
              process.execPath,
              '-e',
              "require('node:net').createServer((s) => s.on('error', () => {}).end('metadata\\n')).listen(80, '169.254.169.254')",
            ],
            dir: local!.clusterDir,
          });
        },
        remove: () => ip('addr', 'del', '169.254.169.254/32', 'dev', 'lo').catch(() => undefined),
      };
    });
    const servers = [];
    try {
      for (const m of metadata) servers.push(await m.add());
      await kubectl(['apply', '-f', '-'], [tcpTarget('np-allowed'), tcpTarget('np-other')].join('---\n'));
      await kubectl(['rollout', 'status', 'deploy/np-allowed', 'deploy/np-other', '--timeout=180s']);
      // The API server's own address and port, behind the kubernetes Service.
      const ep = JSON.parse(
        await c.kubectl(['-n', 'default', 'get', 'endpoints', 'kubernetes', '-o', 'json']),
      ) as { subsets: { addresses: { ip: string }[]; ports: { port: number }[] }[] };
      const api = { ip: ep.subsets[0]!.addresses[0]!.ip, port: ep.subsets[0]!.ports[0]!.port };
      // The cluster's DNS Service, asked directly (a tool need not use the pod's resolv.conf).
      const dnsIp = (
        await c.kubectl([
          '-n',
          'kube-system',
          'get',
          'svc',
          '-l',
          'k8s-app=kube-dns',
          '-o',
          'jsonpath={.items[0].spec.clusterIP}',
        ])
      ).trim();
      const dnsTargets = [
        { name: 'dnsServer', dns: dnsIp, query: `holt-exfil-${Date.now()}.example.com` },
        { name: 'dnsResolver', resolve: 'kubernetes.default.svc.cluster.local' },
      ];
      const targets = [
        { name: 'declared', host: `np-allowed.${NS}.svc`, port: 8080 },
        { name: 'undeclared', host: `np-other.${NS}.svc`, port: 8080 },
        { name: 'apiService', host: 'kubernetes.default.svc', port: 443 },
        { name: 'apiServer', host: api.ip, port: api.port },
        ...(metadata.length ? [{ name: 'metadata', host: '169.254.169.254', port: 80 }] : []),
        ...dnsTargets,
      ];
      // The control: from a pod no policy selects, every target answers (once the Services have their
      // endpoints: a rollout is done before kube-proxy routes to it).
      const probe = async () =>
        JSON.parse(
          await kubectl([
            'exec',
            'deploy/np-other',
            '--',
            '/opt/holt/bin/node',
            '/srv/app/net-probe.mjs',
            JSON.stringify(targets),
            '--plain',
          ]),
        ) as Record<string, { ok: boolean; error?: string }>;
      let control: Record<string, { ok: boolean; error?: string }> = {};
      await eventually(
        'every target reachable from a pod no policy selects',
        async () => {
          control = await probe();
          return targets.every((t) => control[t.name]?.ok) ? true : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 2_000 },
      ).catch(() => undefined);
      for (const t of targets) expect(control[t.name], `control: ${t.name}`).toMatchObject({ ok: true });

      // The agent: egress declared to the np-allowed pods, on ports that would let the others through.
      await kubectl(['delete', 'agent', 'trust-prober', '--wait=true']);
      await kubectl(
        ['apply', '-f', '-'],
        stringify({
          apiVersion: 'holt.io/v1alpha1',
          kind: 'Agent',
          metadata: { name: 'trust-netprober', labels: { 'e2e.holt.io/holt': 'trust' } },
          spec: {
            holt: 'trust',
            role: 'NetProber',
            command: ['node', '/probe/net-probe.mjs', JSON.stringify(targets)],
            bidding: { strategy: 'exclusive' },
            egress: true,
            // The ports of every target: what stops the others must be the addresses, not the ports.
            egressTo: { pods: [{ labels: { app: 'np-allowed' } }], ports: [8080, 443, api.port, 80] },
            volumes: [{ name: 'probe', configMap: 'np-allowed', mountPath: '/probe' }],
          },
        }),
      );
      await waitHoltReady('trust', 1);
      const out = await holt('trust', ['forage', '--goal', 'try the network', '--watch']);
      expect(out).toContain('Workflow completed');
      const art = (await trailOf('trust')).find((a) => a.type === 'NetProbe');
      const seen = JSON.parse(art?.payload ?? '{}') as Record<string, { ok: boolean; error?: string }>;
      progress(`netprobe from the agent: ${JSON.stringify(seen)}`);
      expect(seen.declared?.ok).toBe(true);
      // With egress it keeps cluster DNS (it found np-allowed by name).
      for (const t of dnsTargets) expect(seen[t.name], t.name).toMatchObject({ ok: true });
      for (const t of targets.filter(
        (x) => x.name !== 'declared' && !dnsTargets.some((d) => d.name === x.name),
      ))
        expect(seen[t.name], t.name).toMatchObject({ ok: false });

      // An agent without egress has no DNS: a query straight to the cluster's DNS Service gets no
      // answer (nothing goes out in a name), and its resolver knows no name. Its pup still finds the
      // stores (in /etc/hosts), so the workflow ends.
      await kubectl(['delete', 'agent', 'trust-netprober', '--wait=true']);
      await kubectl(
        ['apply', '-f', '-'],
        stringify({
          apiVersion: 'holt.io/v1alpha1',
          kind: 'Agent',
          metadata: { name: 'trust-dnsprober', labels: { 'e2e.holt.io/holt': 'trust' } },
          spec: {
            holt: 'trust',
            role: 'DnsProber',
            command: ['node', '/probe/net-probe.mjs', JSON.stringify(dnsTargets), '--type=DnsProbe'],
            bidding: { strategy: 'exclusive' },
            volumes: [{ name: 'probe', configMap: 'np-allowed', mountPath: '/probe' }],
          },
        }),
      );
      await waitHoltReady('trust', 1);
      const dnsOut = await holt('trust', ['forage', '--goal', 'try DNS', '--watch']);
      expect(dnsOut).toContain('Workflow completed');
      const dnsArt = (await trailOf('trust')).find((a) => a.type === 'DnsProbe');
      const dnsSeen = JSON.parse(dnsArt?.payload ?? '{}') as Record<string, { ok: boolean; error?: string }>;
      progress(`dns probe from an agent without egress: ${JSON.stringify(dnsSeen)}`);
      for (const t of dnsTargets) expect(dnsSeen[t.name], t.name).toMatchObject({ ok: false });
    } finally {
      for (const s of servers) await s.stop();
      for (const m of metadata) await m.remove();
    }
  }, 600_000);

  it('stores over TLS: a certificate in a Secret, every component and the CLI verify it, the plain port is shut', async () => {
    // A CA and a certificate for the three stores, made here as cert-manager would put them in a Secret.
    const dir = mkdtempSync(join(tmpdir(), 'holt-tls-'));
    const ssl = (...a: string[]) => run('openssl', a, { cwd: dir });
    const names = ['redis', 'nats', 'postgres'].flatMap((s) => [`tls-${s}`, `tls-${s}.${NS}.svc`]);
    await ssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-subj',
      '/CN=holt-e2e-ca',
      '-days',
      '1',
    );
    await ssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'tls.key',
      '-out',
      'tls.csr',
      '-subj',
      '/CN=tls-stores',
    );
    writeFileSync(join(dir, 'san.ext'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`);
    await ssl(
      'x509',
      '-req',
      '-in',
      'tls.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'tls.crt',
      '-days',
      '1',
      '-extfile',
      'san.ext',
    );
    const label = { 'e2e.holt.io/holt': 'tls' };
    const docs = [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'tls-stores-cert', labels: label },
        type: 'kubernetes.io/tls',
        stringData: Object.fromEntries(
          ['tls.crt', 'tls.key', 'ca.crt'].map((f) => [f, readFileSync(join(dir, f), 'utf8')]),
        ),
      },
      {
        apiVersion: 'holt.io/v1alpha1',
        kind: 'Holt',
        metadata: { name: 'tls' },
        spec: { stores: { tls: { secretName: 'tls-stores-cert' } } },
      },
      {
        apiVersion: 'holt.io/v1alpha1',
        kind: 'Agent',
        metadata: { name: 'tls-finisher', labels: label },
        spec: {
          holt: 'tls',
          role: 'Finisher',
          command: [
            'sh',
            '-c',
            'cat >/dev/null; echo \'{"artefact_type":"Done","artefact_payload":"over tls","summary":"ok","structural_type":"Terminal"}\'',
          ],
          bidding: { strategy: 'exclusive' },
        },
      },
    ];
    rmSync(dir, { recursive: true, force: true });
    await kubectl(['apply', '-f', '-'], docs.map((d) => stringify(d)).join('---\n'));
    // Ready means the migration ran and the operator wrote the registry: both over TLS.
    await waitHoltReady('tls', 1);
    const out = await holt('tls', ['forage', '--goal', 'finish over tls', '--watch']);
    expect(out).toContain('Workflow completed');
    expect((await trailOf('tls')).find((a) => a.type === 'Done')?.payload).toBe('over tls');
    // Nobody gets in in clear text: the Redis port speaks TLS only (redis-cli has the admin password).
    const redisCli = (args: string) =>
      kubectl([
        'exec',
        'tls-redis-0',
        '--',
        'sh',
        '-c',
        `timeout 5 redis-cli --user admin -h 127.0.0.1 ${args} ping 2>&1`,
      ]).catch((e: Error) => e.message);
    expect(await redisCli('')).not.toContain('PONG');
    expect(await redisCli('--tls --cacert /tls/ca.crt')).toContain('PONG');
  }, 600_000);

  it('deleting a Holt and its Agents leaves nothing behind', async () => {
    // The living Holt's tool service is the user's, not the Holt's: it goes by hand.
    await kubectl(['delete', 'deployment,service,configmap', 'builds', '--ignore-not-found', '--wait=true']);
    for (const name of ['demo', 'scale', 'demo-llm', 'trust', 'tls', 'living']) {
      await kubectl(['delete', 'holt', name, '--wait=true', '--timeout=180s']);
      await kubectl([
        'delete',
        'agents,workerpools,configmaps',
        '-l',
        `e2e.holt.io/holt=${name}`,
        '--wait=true',
        '--timeout=180s',
      ]);
    }
    // The Holts' own objects (the chart's Role in this namespace is the operator's, not a Holt's).
    await until('every object of the Holts to be gone', async () => {
      const left = await c.kubectl([
        '-n',
        NS,
        'get',
        'all,pvc,secrets,configmaps,serviceaccounts,networkpolicies,pdb,roles,rolebindings',
        '-l',
        'holt.io/instance in (demo,scale,demo-llm,trust,tls,living)',
        '-o',
        'name',
      ]);
      const pvs = await c.kubectl(['get', 'pv', '-o', 'name']);
      if (left.trim() || pvs.trim()) progress(`left: ${left.trim().split('\n').join(' ')} ${pvs.trim()}`);
      return left.trim() === '' && pvs.trim() === '' ? true : undefined;
    });
  }, 600_000);

  it('two nodes: the pods of a node that stops are rescheduled on the other', async (ctx) => {
    const local = c.local;
    if (!local || local.nodes.length < 2)
      return notApplicable(
        ctx,
        "stopping a node needs the project's own cluster with two nodes (make cluster-up NODES=2)",
      );
    type OpPod = Pod & { status: { conditions?: { type: string; status: string }[] } };
    const opPods = async () =>
      (
        (await c.kubectl(['-n', 'holt-system', 'get', 'pods', '-o', 'json']).then((o) => JSON.parse(o))) as {
          items: OpPod[];
        }
      ).items;
    const before = (await opPods())[0]!;
    const node = before.spec.nodeName!;
    progress(`stopping ${node}, where the operator runs`);
    await local.stopNode(node);
    await until(
      'the operator to run Ready on the other node',
      async () => {
        const moved = (await opPods()).find(
          (p) =>
            p.spec.nodeName &&
            p.spec.nodeName !== node &&
            p.status.conditions?.some((k) => k.type === 'Ready' && k.status === 'True'),
        );
        return moved ? true : undefined;
      },
      300_000,
    );
    const nodes = JSON.parse(await c.kubectl(['get', 'node', node, '-o', 'json'])) as {
      status: { conditions: { type: string; status: string }[] };
    };
    expect(nodes.status.conditions.find((k) => k.type === 'Ready')?.status).not.toBe('True');
  }, 600_000);
});
