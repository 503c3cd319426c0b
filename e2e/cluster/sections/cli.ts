import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expect, it } from 'vitest';
import type { Artefact } from '../../../src/blackboard/types.ts';
import { kubeBinary } from '../../../test/harness/bins.ts';
import { launchChromium } from '../../../test/harness/browser.ts';
import { consoleLink } from '../../../test/harness/console-cli.ts';
import { eventually } from '../../../test/harness/wait.ts';
import {
  CLUSTER_WAIT,
  c,
  holt,
  holtIn,
  kubectl,
  NS,
  pods,
  progress,
  ROOT,
  redisCli,
  run,
  trailOf,
  waitHoltReady,
} from '../ctx.ts';
import { agentDoc, holtDoc, holtLabel, yamlDocs } from '../manifests.ts';

/**
 * The real cluster: the cluster user's whole CLI, `holt --kube` as a user runs it (and `kubectl holt`,
 * the plugin), on the Holts the demo and llm sections left: `demo` (a finished workflow), `scale` (a
 * WorkerPool at zero workers) and `living` (a living agent with ingress tokens ci and ops). A Holt of
 * its own, `ask`, asks a question that the CLI answers; deleted at the end. Each test works on one Holt
 * of its own, so they run concurrently (and with the neighbouring concurrent sections).
 */

/** A command agent that asks a question about its goal and finishes with the answer (test/fixtures). */
function askManifests(): string {
  const fixture = (f: string) => readFileSync(join(ROOT, 'test', 'fixtures', 'agents', f), 'utf8');
  return yamlDocs([
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ask-scripts', labels: holtLabel('ask') },
      data: { 'asker.mjs': fixture('asker.mjs'), 'bid-types.mjs': fixture('bid-types.mjs') },
    },
    holtDoc('ask', { orchestrator: { bidTimeoutSeconds: 120 } }),
    agentDoc('ask-asker', 'ask', {
      role: 'Asker',
      command: ['node', '/ask/asker.mjs'],
      // Only the goal: never its own Question, Answer or result.
      bidding: { script: ['node', '/ask/bid-types.mjs', 'GoalDefined', 'exclusive'], strategy: 'ignore' },
      volumes: [{ name: 'ask', configMap: 'ask-scripts', mountPath: '/ask' }],
    }),
  ]);
}

/** `holt --kube NS/<holt> ...` that must fail: its exit code and stderr. */
async function holtFails(name: string, args: string[]): Promise<{ code: number; stderr: string }> {
  const r = await holtIn(NS, name, args);
  expect(r.code, `holt ${args.join(' ')} should fail: ${r.stdout}`).not.toBe(0);
  return r;
}

/** The claim of an artefact, from the Holt's Redis (as the blackboard keeps it). */
async function claimOf(holtName: string, artefact: string): Promise<string | undefined> {
  const id = await redisCli(holtName, 'GET', `holt:${holtName}:claim_by_artefact:${artefact}`);
  return id || undefined;
}

/** The sections of `holt logs` (one per pod: `==> pod <==`), by pod name. */
function logSections(out: string): Map<string, string> {
  const sections = new Map<string, string>();
  for (const part of out.split(/^==> /m).slice(1)) {
    const [head = '', ...rest] = part.split('\n');
    sections.set(head.replace(/ <==.*$/, ''), rest.join('\n'));
  }
  return sections;
}

export function cliTests(): void {
  it.concurrent('holt --kube status and logs of a pup, and `kubectl holt` as a kubectl plugin, on the finished demo', async () => {
    const t0 = Date.now();
    type Status = {
      status: { phase?: string; agents?: { total?: number; ready?: number } };
      pods: string[][];
      claims: Record<string, number>;
    };
    // The demo Holt may be rolling its agents' pods right now (seen once: its Deployments scaled 1 → 0 → 1
    // mid-run, cause not found): what is checked here is what the CLI shows of it once it is Ready.
    await waitHoltReady('demo', 5);
    const st = JSON.parse(await holt('demo', ['status', '--json'])) as Status;
    expect(st.status.phase).toBe('Ready');
    expect(st.status.agents).toMatchObject({ total: 5, ready: 5 });
    const podNames = st.pods.map((p) => p[0]);
    for (const role of ['drafter', 'reviewer', 'linter', 'publisher', 'finisher', 'orchestrator'])
      expect(podNames.some((n) => n?.startsWith(`demo-${role}`))).toBe(true);
    // Its claims by status are the blackboard's: counted again here from the claim hashes in Redis.
    const statuses = (
      await redisCli(
        'demo',
        'EVAL',
        "local r = {} for _, k in ipairs(redis.call('KEYS', ARGV[1])) do if redis.call('TYPE', k).ok == 'hash' then local s = redis.call('HGET', k, 'status') if s then r[#r + 1] = s end end end return r",
        '0',
        'holt:demo:claim:*',
      )
    )
      .split('\n')
      .filter(Boolean);
    const counted: Record<string, number> = {};
    for (const x of statuses) counted[x] = (counted[x] ?? 0) + 1;
    expect(st.claims).toEqual(counted);
    expect(st.claims.complete ?? 0).toBeGreaterThan(0);
    const text = await holt('demo', ['status']);
    expect(text).toMatch(/^Holt holt-e2e\/demo: Ready \(agents 5\/5 ready\)/);
    expect(text).toMatch(/Claims: .*complete=\d+/);

    // A pup's log: the Drafter's one pod, its JSON lines, among them the goal's claim it was granted.
    const [goal] = (await trailOf('demo')).filter((a) => a.type === 'GoalDefined');
    const goalClaim = await claimOf('demo', goal!.id);
    const log = await holt('demo', ['logs', 'Drafter', '--lines', '2000']);
    const lines = log
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.component === 'pup' && l.event_type === 'pup_started')).toBe(true);
    expect(
      lines.some((l) => l.claim_id === goalClaim && String(l.event_type).startsWith('grant_')),
      `the Drafter's log names its grant of claim ${goalClaim}`,
    ).toBe(true);
    const orch = await holt('demo', ['logs', 'orchestrator', '--lines', '50']);
    expect(
      orch.split('\n').some((l) => l.startsWith('{') && JSON.parse(l).component === 'orchestrator'),
    ).toBe(true);
    expect((await holtFails('demo', ['logs', 'Nobody'])).stderr).toContain("no pods of 'Nobody'");

    // kubectl finds `kubectl-holt` on PATH and runs it with its own KUBECONFIG.
    const plugin = await run(kubeBinary('kubectl'), ['holt', '--kube', `${NS}/demo`, 'status', '--json'], {
      env: { ...process.env, PATH: `${join(ROOT, 'bin')}:${process.env.PATH}`, KUBECONFIG: c.kubeconfigPath },
    });
    expect((JSON.parse(plugin.stdout) as Status).status.phase).toBe('Ready');
    progress(`cli: status, logs, plugin in ${Math.round((Date.now() - t0) / 1000)} s`);
  }, 300_000);

  it.concurrent('holt --kube console on the finished demo, in headless Chromium: the one-time link signs in, the workflow is listed completed', async () => {
    const served = spawn(join(ROOT, 'bin', 'holt'), ['--kube', `${NS}/demo`, 'console'], {
      env: { ...process.env, KUBECONFIG: c.kubeconfigPath, NO_COLOR: '1' },
    });
    const browser = await launchChromium();
    try {
      const url = await consoleLink(served);
      const page = await browser.newPage();
      await page.goto(url);
      await page.waitForSelector('[data-conn="live"]');
      const row = await page.waitForSelector('tr[data-goal][data-status="completed"]', { timeout: 60_000 });
      expect(await row!.evaluate((tr) => tr.textContent)).toContain('GoalDefined');
      // The link worked once; without the session nothing is served.
      expect((await fetch(url, { redirect: 'manual' })).status).toBe(401);
      expect((await fetch(new URL('/api/workflows', url))).status).toBe(401);
    } finally {
      await browser.close();
      served.kill('SIGTERM');
    }
  });

  it.concurrent('holt --kube mcp on the finished demo: an MCP client reads its status, waits for a workflow, reads its graph', async () => {
    const t0 = Date.now();
    const transport = new StdioClientTransport({
      command: join(ROOT, 'bin', 'holt'),
      args: ['--kube', `${NS}/demo`, 'mcp'],
      env: { ...(process.env as Record<string, string>), KUBECONFIG: c.kubeconfigPath, NO_COLOR: '1' },
      stderr: 'ignore',
    });
    const client = new Client({ name: 'cluster-e2e', version: '1.0.0' });
    await client.connect(transport);
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r = (await client.callTool({ name, arguments: args }, undefined, {
        timeout: 120_000,
      })) as CallToolResult;
      const text = r.content.map((x) => (x.type === 'text' ? x.text : '')).join('');
      return { isError: r.isError === true, text };
    };
    try {
      await waitHoltReady('demo', 5);
      const st = await call('status');
      expect(st.isError, st.text).toBe(false);
      expect(JSON.parse(st.text)).toMatchObject({ namespace: NS, name: 'demo', status: { phase: 'Ready' } });
      const [goal] = (await trailOf('demo')).filter((a) => a.type === 'GoalDefined');
      const waited = await call('wait_for_workflow', { goal: goal!.id, timeout_seconds: 60 });
      const w = JSON.parse(waited.text) as { state: string; terminal: Artefact; artefacts: { id: string }[] };
      expect(w.state).toBe('completed');
      expect(w.terminal.produced_by_role).toBe('Finisher');
      const listed = JSON.parse((await call('list_artefacts', { goal: goal!.id.slice(0, 8) })).text) as {
        total: number;
      };
      expect(listed.total).toBe(w.artefacts.length);
      const graph = await client.readResource({ uri: `holt://workflow/${goal!.id}/graph` });
      const mermaid = graph.contents[0] && 'text' in graph.contents[0] ? graph.contents[0].text : '';
      expect(mermaid.startsWith('flowchart LR\n')).toBe(true);
      for (const a of w.artefacts) expect(mermaid).toContain(a.id.slice(0, 8));
      const unknown = await call('read_artefact', { id: 'zzzzzzzz' });
      expect(unknown).toEqual({ isError: true, text: 'no artefacts found matching "zzzzzzzz"' });
    } finally {
      await client.close();
    }
    progress(`cli: holt --kube mcp in ${Math.round((Date.now() - t0) / 1000)} s`);
  }, 300_000);

  it.concurrent('holt --kube logs of a worker: a goal to scale (no worker at rest) starts one; its log shows it and the claim it ran', async () => {
    const t0 = Date.now();
    // The pool's 15 s idle cooldown could take the worker, and its log, away between two polls of a
    // slow `holt logs` on a loaded machine: it keeps its worker for this test, then goes back.
    const cooldown = (s: number) =>
      kubectl([
        'patch',
        'workerpool',
        'scale-sleeper-workers',
        '--type',
        'merge',
        '-p',
        JSON.stringify({ spec: { autoscaling: { cooldownSeconds: s } } }),
      ]);
    await cooldown(600);
    try {
      await logOfAWorker(t0);
    } finally {
      await cooldown(15);
    }
  }, 300_000);

  it.concurrent('holt --kube token, life, send and work on the living agent: tokens from its Secrets, stop refuses a send, start takes it', async () => {
    const t0 = Date.now();
    type Token = { name: string; role: string; origin: string; secretName: string };
    const tokens = JSON.parse(await holt('living', ['token', 'list', '-j'])) as Token[];
    expect(tokens.map((t) => [t.name, t.role, t.origin, t.secretName])).toEqual([
      ['ci', 'Watcher', 'webhook', 'living-watcher-ingress-ci'],
      ['ops', 'Watcher', 'operator', 'living-watcher-ingress-ops'],
    ]);
    const ci = (await holt('living', ['token', 'show', 'Watcher', 'ci'])).trim();
    const secret = await kubectl([
      'get',
      'secret',
      'living-watcher-ingress-ci',
      '-o',
      'jsonpath={.data.token}',
    ]);
    expect(ci).toBe(Buffer.from(secret, 'base64').toString('utf8'));
    expect((await holtFails('living', ['token', 'create', 'Watcher'])).stderr).toContain(
      'spec.ingress.tokens',
    );

    // The item the llm section's turns made and completed, from the Holt's Postgres.
    type Item = { id: string; role: string; objective: string; state: string; report: string | null };
    const items = JSON.parse(await holt('living', ['work', 'list', '--all', '-j'])) as Item[];
    expect(items.map((i) => [i.role, i.objective, i.state])).toEqual([
      ['Watcher', 'Report on build 7 once it settles', 'completed'],
    ]);
    expect(await holt('living', ['work', 'list'])).toContain('No open work items');
    const shown = await holt('living', ['work', 'show', items[0]!.id.slice(0, 8)]);
    expect(shown).toContain(`Work item ${items[0]!.id} (Watcher)`);
    expect(shown).toContain('state:      completed');
    // Its memories, from the same Postgres (the table the migration Job made; none unless it remembers).
    expect(
      Array.isArray(JSON.parse(await holt('living', ['memory', 'list', '--role', 'Watcher', '-j']))),
    ).toBe(true);

    type Life = {
      messages: { body: string | null; labels: { origin: string; admission: string } }[];
      audit: { decision: string }[];
    };
    const life = JSON.parse(await holt('living', ['life', 'show', 'Watcher', '-j'])) as Life;
    expect(life.messages.map((m) => [m.labels.origin, m.labels.admission, m.body])).toEqual(
      expect.arrayContaining([
        ['webhook', 'token ci', 'Build 7 started; tell us how it ends.'],
        ['operator', 'token ops', 'Stand down for today.'],
      ]),
    );
    expect(life.audit.length).toBeGreaterThan(0);

    // Stopped: its ingress answers 409 to the CLI's send (the agent's operator token, read by the CLI).
    expect(await holt('living', ['life', 'stop', 'Watcher'])).toContain('Watcher stopped');
    const refused = await holtFails('living', ['send', 'Watcher', 'while stopped']);
    expect(refused.stderr).toContain('the ingress answered 409');
    expect(await holt('living', ['life', 'start', 'Watcher'])).toContain('Watcher running');
    const sent = await holt('living', ['send', 'Watcher', 'cli: are you there?', '--key', 'cli-1']);
    expect(sent).toMatch(/^queued: message \S+ for Watcher/);
    const again = await holt('living', ['send', 'Watcher', 'cli: are you there?', '--key', 'cli-1']);
    expect(again).toMatch(/^already queued: message/);
    expect(await holt('living', ['wake', 'Watcher'])).toMatch(/^queued: wake \S+ for Watcher/);
    // Its tasks, through the orchestrator's ingress API (the agent's operator token, read by the CLI).
    const tasks = JSON.parse(await holt('living', ['life', 'tasks', 'Watcher', '-j'])) as { kind: string }[];
    expect(Array.isArray(tasks)).toBe(true);
    const unknown = await holtFails('living', ['life', 'cancel', 'Watcher', 'deadbeef']);
    expect(unknown.stderr).toContain('the ingress answered 404: agent Watcher has no open task deadbeef');
    const after = JSON.parse(await holt('living', ['life', 'show', 'Watcher', '-j'])) as Life;
    const mine = after.messages.filter((m) => m.body?.startsWith('cli:') || m.body === 'while stopped');
    expect(mine.map((m) => [m.labels.origin, m.labels.admission, m.body])).toEqual([
      ['operator', 'token ops', 'cli: are you there?'],
    ]);
    progress(`cli: token, work, life, send, tasks in ${Math.round((Date.now() - t0) / 1000)} s`);
  }, 300_000);

  it.concurrent('holt --kube questions and answer: a Question asked on the cluster is answered from the CLI, the agent resumes; graph draws it', async () => {
    const t0 = Date.now();
    await kubectl(['apply', '-f', '-'], askManifests());
    try {
      await waitHoltReady('ask', 1);
      progress(`cli: ask Ready after ${Math.round((Date.now() - t0) / 1000)} s of this test`);
      expect(await holt('ask', ['questions'])).toContain('No open questions.');
      await holt('ask', ['forage', '--goal', 'paint the shed']);
      const q = JSON.parse(
        (await holt('ask', ['questions', '--wait', '-o', 'jsonl'])).trim().split('\n')[0]!,
      ) as Artefact;
      expect(q.payload).toBe('Which colour for: paint the shed?');
      expect(q.produced_by_role).toBe('Asker');
      expect(await holt('ask', ['questions'])).toContain(q.id.slice(0, 8));
      // A live watch, subscribed before the answer, sees the Answer and the result and exits on it.
      const subscribers = async () =>
        Number((await redisCli('ask', 'PUBSUB', 'NUMSUB', 'holt:ask:artefact_events')).split('\n')[1]);
      const base = await subscribers();
      const watching = holtIn(NS, 'ask', [
        'watch',
        '--exit-on-completion',
        '-o',
        'jsonl',
        '--timeout',
        '300',
      ]);
      await eventually(
        'the watch to subscribe',
        async () => ((await subscribers()) > base ? true : undefined),
        CLUSTER_WAIT,
      );
      expect(await holt('ask', ['answer', q.id.slice(0, 8), 'green'])).toContain(`(answers ${q.id})`);
      const watched = await watching;
      expect(watched.code, watched.stderr).toBe(0);
      expect(watched.stdout).toContain('"structural_type":"Answer"');
      expect(watched.stdout).toContain('answer was: green');
      const done = (await trailOf('ask')).find((a) => a.structural_type === 'Terminal')!;
      expect(done.payload).toBe('answer was: green');
      expect(await holt('ask', ['questions'])).toContain('No open questions.');
      const trail = await trailOf('ask');
      expect(trail.map((a) => a.structural_type)).toEqual(['Standard', 'Question', 'Answer', 'Terminal']);
      // The graph: a node per artefact, the Question a hexagon, the result a stadium.
      const graph = await holt('ask', ['graph']);
      const lines = graph.trim().split('\n');
      expect(lines[0]).toBe('flowchart LR');
      expect(lines.filter((l) => /^ {2}a\d+[[({]/.test(l))).toHaveLength(trail.length);
      expect(graph).toMatch(/a\d+\{\{"[^"]*Question/);
      expect(graph).toMatch(/a\d+\(\["[^"]*Done/);
      expect(lines.filter((l) => / -->/.test(l)).length).toBeGreaterThanOrEqual(trail.length - 1);
      const dot = await holt('ask', ['graph', '-o', 'dot', '--goal', trail[0]!.id.slice(0, 8)]);
      expect(dot).toMatch(/^digraph/);
    } finally {
      await kubectl(['delete', 'holt', 'ask', '--ignore-not-found', '--wait=true', '--timeout=180s']);
      await kubectl([
        'delete',
        'agents,configmaps',
        '-l',
        'e2e.holt.io/holt=ask',
        '--wait=true',
        '--timeout=180s',
      ]);
      // Nothing of it left for the teardown section to wait on (its volumes included).
      await eventually(
        'every object of ask to be gone',
        async () => {
          const left = await c.kubectl([
            '-n',
            NS,
            'get',
            'all,pvc,secrets',
            '-l',
            'holt.io/instance=ask',
            '-o',
            'name',
          ]);
          return left.trim() === '' ? true : undefined;
        },
        CLUSTER_WAIT,
      );
      progress(`cli: questions, answer, graph and ask deleted in ${Math.round((Date.now() - t0) / 1000)} s`);
    }
  }, 600_000);
}

/** Forages a goal for the scale Holt, then reads the worker that ran it in `holt logs Sleeper`. */
async function logOfAWorker(t0: number): Promise<void> {
  const before = new Set((await trailOf('scale')).map((a) => a.id));
  await holt('scale', ['forage', '--goal', 'cli: log me']);
  const goal = (await trailOf('scale')).find((a) => !before.has(a.id) && a.type === 'GoalDefined')!;
  expect(goal.payload).toBe('cli: log me');
  const claim = await eventually('the goal to be claimed', () => claimOf('scale', goal.id), CLUSTER_WAIT);
  // Read while the worker runs: its section of `holt logs Sleeper`, beside the controller's.
  const { worker, section } = await eventually(
    'a worker pod with its log in `holt logs Sleeper`',
    async () => {
      const workers = (await pods('holt.io/instance=scale,app.kubernetes.io/component=worker')).map(
        (p) => p.metadata.name,
      );
      const sections = logSections(await holt('scale', ['logs', 'Sleeper', '--lines', '500']));
      for (const w of workers) {
        const s = sections.get(w);
        if (s?.includes('"event_type":"inbox_claim_finished"') && s.includes(`"claim_id":"${claim}"`))
          return { worker: w, section: s };
      }
      return undefined;
    },
    CLUSTER_WAIT,
  );
  expect(section).toContain('"mode":"worker"');
  progress(`cli: the log of worker ${worker} in ${Math.round((Date.now() - t0) / 1000)} s`);
  const done = await eventually(
    'the goal to finish',
    async () =>
      (await trailOf('scale')).find(
        (a) => a.structural_type === 'Terminal' && a.source_artefacts.includes(goal.id),
      ),
    CLUSTER_WAIT,
  );
  expect(done.type).toBe('Slept');
}
