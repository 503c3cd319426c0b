import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import type { Artefact } from '../../src/blackboard/types.ts';
import { type EventuallyOptions, eventually } from '../../test/harness/wait.ts';
import type { E2eTarget } from './target.ts';

/**
 * The whole product on a real cluster: the chart installed with the built operator image, Holts from
 * `kubectl apply`, bundled stores as StatefulSets on PVCs, every agent in a real container run by a
 * real kubelet, goals and trails through `holt --kube`. The project's own cluster (two nodes) unless
 * HOLT_E2E_KUBECONFIG names another (kind: e2e/kind/run.sh).
 */
export const ROOT = resolve(import.meta.dirname, '..', '..');
export const HOLT = join(ROOT, 'bin', 'holt');
export const NS = 'holt-e2e';
export const run = promisify(execFile);
/**
 * Runs a command in the first node's network namespace: a client on the nodes' network, outside every
 * pod (local cluster only). Resolves with its stdout.
 */
export async function onNode(command: string, args: string[]): Promise<string> {
  const netns = c.local?.nodes[0]?.plan.netns;
  if (!netns) throw new Error('no node network namespace: only a local cluster has one');
  return (await run('nsenter', [`--net=/run/netns/${netns}`, '--', command, ...args])).stdout;
}

/** A GET from the first node's network namespace (onNode); the body as text. */
export const getOnNode = (url: string) =>
  onNode(process.execPath, [
    '-e',
    `fetch(${JSON.stringify(url)}).then((r) => r.text()).then((t) => process.stdout.write(t))`,
  ]);

export const progress = (l: string) => console.log(`[e2e ${new Date().toISOString().slice(11, 19)}] ${l}`);

/** The cluster under test: set once by the suite's beforeAll (a live binding for every section). */
export let c: E2eTarget;
export function setTarget(t: E2eTarget): void {
  c = t;
}

export const kubectl = (args: string[], input?: string) => c.kubectl(['-n', NS, ...args], { input });
export async function getJson<T>(args: string[]): Promise<T | undefined> {
  const r = await c.kubectlResult(['-n', NS, 'get', ...args, '-o', 'json'], { allowFail: true });
  return r.code === 0 ? (JSON.parse(r.stdout) as T) : undefined;
}

/** What the namespace looks like, for a failed wait's message. */
export async function describeNs(): Promise<string> {
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

/** How the e2e waits on the cluster (`eventually(what, check, CLUSTER_WAIT)`): slow steps (pulls, node
 * starts) get minutes, polled each second, and a timeout prints what the namespace looked like. */
export const CLUSTER_WAIT: EventuallyOptions = { timeoutMs: 240_000, intervalMs: 1000, describe: describeNs };

/** `holt --kube <ns>/<holt> ...` as a user runs it, with the e2e kubeconfig. */
export async function holt(holtName: string, args: string[]): Promise<string> {
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

export async function trailOf(holtName: string): Promise<Artefact[]> {
  const out = await holt(holtName, ['hoard', '-o', 'jsonl']);
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Artefact)
    .sort((a, b) => a.created_at_ms - b.created_at_ms);
}

export type Pod = {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec: { nodeName?: string; volumes?: { persistentVolumeClaim?: { claimName: string } }[] };
  status: { phase?: string; containerStatuses?: { name: string; restartCount: number; ready: boolean }[] };
};
export const pods = async (selector: string) =>
  (await getJson<{ items: Pod[] }>(['pods', '-l', selector]))?.items ?? [];

export async function waitHoltReady(name: string, agents: number): Promise<void> {
  type Holt = { status?: { phase?: string; agents?: { total?: number; ready?: number } } };
  await eventually(
    `Holt ${name} Ready with ${agents} agents`,
    async () => {
      const h = await getJson<Holt>(['holt', name]);
      return h?.status?.phase === 'Ready' &&
        h.status.agents?.total === agents &&
        h.status.agents.ready === agents
        ? true
        : undefined;
    },
    { ...CLUSTER_WAIT, timeoutMs: 420_000 },
  );
}

/**
 * Freezes the pup of an agent pod: SIGSTOP to the pup process (a child of tini, PID 1 of the
 * container; node names its main thread MainThread, so it is found by its command line).
 */
export async function freezePup(pod: string): Promise<void> {
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

/** `redis-cli` as the admin user in the bundled Redis of the Holt `holtName` (namespace NS): its output, trimmed. */
export const redisCli = async (holtName: string, ...args: string[]): Promise<string> =>
  (
    await kubectl([
      'exec',
      `${holtName}-redis-0`,
      '--',
      'redis-cli',
      '--user',
      'admin',
      '--no-auth-warning',
      ...args,
    ])
  ).trim();

/** Issue 29's lifecycle tests: a Holt of their own in a namespace of their own, deleted at the end. */
export const LIFE_NS = 'holt-e2e-life';

/** `holt --kube <ns>/<name> ...`: stdout, or the exit code and stderr when it fails. */
export async function holtIn(
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
 * The last message the scripted model (`llmServer(script, name)`, which logs one JSON line per request)
 * was shown that names `surface` (a tool result's label), or undefined.
 */
export async function shownToModel(llm: string, surface: string): Promise<string | undefined> {
  return (await kubectl(['logs', `deploy/${llm}`]))
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { last?: string }).last ?? '')
    .find((l) => l.includes(`surface="${surface}"`));
}

/** Two Holts talking A2A: each in a namespace of its own (e2e/cluster/sections/a2a.ts). */
export const A2A_NS = { alpha: 'holt-e2e-alpha', beta: 'holt-e2e-beta' } as const;
