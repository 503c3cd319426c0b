import { execFile, execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artefact } from '../src/blackboard/types.ts';
import { type InstanceState, isAlive } from '../src/local/instance.ts';
import { launchChromium } from '../test/harness/browser.ts';
import { eventually } from '../test/harness/wait.ts';
import { expectDemoTrail } from './demo-trail.ts';
import { commitWorkspace } from './git-workspace.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');

let scratch: string;
let ws: string;
let env: NodeJS.ProcessEnv;

async function holt(
  args: string[],
  opts: { cwd?: string; ok?: boolean; env?: Record<string, string>; timeout?: number } = {},
) {
  try {
    const r = await run(HOLT, args, {
      cwd: opts.cwd ?? ws,
      env: { ...env, ...opts.env },
      maxBuffer: 20 * 1024 * 1024,
      ...(opts.timeout ? { timeout: opts.timeout } : {}),
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    if (opts.ok) throw new Error(`holt ${args.join(' ')} failed (${x.code}): ${x.stderr}`);
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

function state(name: string): InstanceState {
  return JSON.parse(
    readFileSync(join(env.HOLT_HOME!, 'instances', name, 'state.json'), 'utf8'),
  ) as InstanceState;
}

function newWorkspace(name: string): string {
  const dir = join(scratch, name);
  cpSync(join(ROOT, 'examples', 'demo'), dir, { recursive: true });
  // The demo's 10 s bid timeout counts a slow bid as ignore; on a busy CI machine a bid (a node
  // process) can be that slow, and the workflow would change under the test.
  const file = join(dir, 'holt.yml');
  const yml = readFileSync(file, 'utf8');
  if (!yml.includes('bid_timeout: 10s')) throw new Error('examples/demo/holt.yml: bid_timeout moved');
  writeFileSync(file, yml.replace('bid_timeout: 10s', 'bid_timeout: 120s'));
  commitWorkspace(dir);
  return dir;
}

beforeAll(() => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'cli-'));
  env = { ...process.env, HOLT_HOME: join(scratch, 'home'), NO_COLOR: '1' };
  ws = newWorkspace('ws');
});

afterAll(async () => {
  for (const n of ['demo', 'survivor']) await holt(['down', '--name', n]);
  rmSync(scratch, { recursive: true, force: true });
});

/**
 * `holt graph -o html --serve` in a real browser (Debian's Chromium, headless): the page shows every
 * artefact of the demo, loads nothing from outside, and draws a new workflow's goal without a reload.
 */
async function livePage(ids: string[]): Promise<void> {
  const served = spawn(HOLT, ['graph', '--name', 'demo', '-o', 'html', '--serve'], { cwd: ws, env });
  const browser = await launchChromium();
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let text = '';
      served.stdout.on('data', (c: Buffer) => {
        text += c.toString();
        const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(text);
        if (m) resolve(m[0]);
      });
      served.once('exit', (code) => reject(new Error(`holt graph --serve exited ${code}: ${text}`)));
    });
    const html = await (await fetch(url)).text();
    expect(html).not.toMatch(/<script[^>]*\ssrc=|<link\b|@import|url\(/);
    const page = await browser.newPage();
    await page.goto(url);
    const nodes = () => page.$$eval('#graph g.node title', (ts) => ts.map((t) => t.textContent ?? ''));
    await page.waitForFunction('document.body.dataset.artefacts !== ""');
    expect(new Set(await nodes())).toEqual(new Set(ids));
    const shot = await page.screenshot({ fullPage: true });
    expect(Buffer.from(shot).subarray(1, 4).toString()).toBe('PNG');
    // A new goal while the page is open: it appears without a reload.
    await holt(['forage', '--name', 'demo', '--goal', 'draw me live', '--allow-dirty'], { ok: true });
    await page.waitForFunction(`document.querySelectorAll('#graph g.node').length > ${ids.length}`, {
      timeout: 30_000,
    });
    expect(await page.$eval('#status', (e) => e.textContent)).toMatch(/^live: \d+ artefacts/);
  } finally {
    await browser.close();
    served.kill('SIGINT');
  }
}

describe('holt CLI end to end (real binary, real servers)', () => {
  it('up → forage --watch → hoard shows the whole protocol; down leaves no process', async () => {
    const upRes = await holt(['up', '--name', 'demo'], { ok: true });
    expect(upRes.stdout).toContain("Instance 'demo' started successfully (5 agents ready)");

    const w = await holt(
      ['forage', '--name', 'demo', '--goal', 'plan it', '--watch', '-o', 'jsonl', '--timeout', '90'],
      {
        ok: true,
      },
    );
    const events = w.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; data: Record<string, unknown> });
    expect(events.at(-1)?.event).toBe('workflow_completed');
    expect(events.map((e) => e.event)).toContain('feedback_claim_created');

    const hoard = await holt(['hoard', '--name', 'demo', '-o', 'jsonl'], { ok: true });
    const trail = hoard.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Artefact);
    expectDemoTrail(trail, (...args) => execFileSync('git', args, { cwd: ws }).toString().trim());
    expect(readFileSync(join(ws, 'docs', 'plan.md'), 'utf8')).toContain('## Summary');
    // One trace from goal to Terminal, the rework included (the feedback claim carries it on), and
    // the default listing names it.
    const traces = new Set(trail.map((a) => a.traceparent?.split('-')[1]));
    expect([...traces]).toEqual([expect.stringMatching(/^[0-9a-f]{32}$/)]);
    const listed = (await holt(['hoard', '--name', 'demo'], { ok: true })).stdout;
    expect(listed).toMatch(new RegExp(`${[...traces][0]}\\s+${trail.length} artefacts from `));

    // The same workflow as a picture: every artefact a node, the rejection and the rework marked.
    const dot = (await holt(['graph', '--name', 'demo', '-o', 'dot'], { ok: true })).stdout;
    for (const a of trail) expect(dot).toContain(`"${a.id}" [label=`);
    expect(dot).toContain('label="changes asked"');
    expect(dot).toContain('label="approved"');
    expect(dot).toMatch(/style=dashed.*label="v2"/);
    const goal = trail.find((a) => a.type === 'GoalDefined')!;
    const one = (
      await holt(['graph', '--name', 'demo', '-o', 'mermaid', '--goal', goal.id.slice(0, 8)], { ok: true })
    ).stdout;
    expect(one.split('\n').filter((l) => /^ {2}a\d+[[({]/.test(l))).toHaveLength(trail.length);
    const svgFile = join(scratch, 'demo.svg');
    const drawn = await holt(['graph', '--name', 'demo', '-o', 'svg', '--file', svgFile], { ok: true });
    expect(drawn.stderr).toContain(`${trail.length} artefacts, 1 workflow(s)`);
    expect(readFileSync(svgFile, 'utf8')).toMatch(/<svg[\s\S]*<\/svg>/);
    if (process.env.HOLT_GRAPH_OUT) cpSync(svgFile, process.env.HOLT_GRAPH_OUT);
    const bad = await holt(['graph', '--name', 'demo', '-o', 'png']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/png.*invalid|Allowed choices/i);

    const st = JSON.parse((await holt(['status', '--name', 'demo', '--json'], { ok: true })).stdout) as {
      claims: Record<string, number>;
    };
    // goal, Draft v1 (terminated by the rejection), feedback claim, Draft v2, CodeCommit complete; LintReport dormant.
    expect(st.claims.terminated).toBe(1);
    expect(st.claims.complete).toBeGreaterThanOrEqual(4);
    // Last, as it starts a second workflow: the live page.
    await livePage(trail.map((a) => a.id));

    const before = state('demo');
    const pids = [
      before.supervisorPid,
      ...before.components.map((c) => c.pid),
      ...before.stores.map((s) => s.pid),
    ];
    expect(pids.filter(Boolean).length).toBeGreaterThanOrEqual(10);
    const downRes = await holt(['down', '--name', 'demo'], { ok: true });
    expect(downRes.stdout).toContain("Instance 'demo' removed successfully");
    expect(pids.filter((p) => isAlive(p))).toEqual([]);
  });

  it('survives an agent killed mid-workflow: the supervisor restarts it and the workflow completes', async () => {
    const dir = newWorkspace('ws2');
    // A guard against a hang, not a speed check: six components start beside a busy cluster in CI.
    await holt(['up', '--name', 'survivor', '--timeout', '120'], { cwd: dir, ok: true });
    const publisher = state('survivor').components.find((c) => c.role === 'Publisher')!;
    process.kill(publisher.pid!, 'SIGKILL');
    const w = await holt(
      ['forage', '--name', 'survivor', '--goal', 'again', '--watch', '-o', 'jsonl', '--timeout', '90'],
      {
        cwd: dir,
      },
    );
    expect(w.code).toBe(0);
    const after = state('survivor').components.find((c) => c.role === 'Publisher')!;
    expect(after.restarts).toBeGreaterThanOrEqual(1);
    expect(after.pid).not.toBe(publisher.pid);
    await holt(['down', '--name', 'survivor'], { ok: true });
  }, 300_000);

  it('runtime subcommands hand their own flags to their program (as pods run them)', async () => {
    const pup = await run(HOLT, ['pup', '--execute-claim', 'not-a-uuid'], {
      env: {
        ...env,
        HOLT_INSTANCE_NAME: 'x',
        HOLT_AGENT_NAME: 'A',
        REDIS_URL: 'redis://127.0.0.1:1',
        HOLT_AGENT_COMMAND: '["true"]',
        HOLT_BIDDING_STRATEGY: 'claim',
      },
    }).catch((e: { code: number; stderr: string }) => e);
    expect(pup.stderr).toContain('--execute-claim: must be a claim UUID');
    const op = await holt(['operator', '--leader-elect=false', '--bogus', '1']);
    expect(op.code).toBe(2);
    expect(op.stderr).toContain("unknown option '--bogus'");
    // --help and --version of every program: printed, exit 0, nothing started (no store is reachable
    // here, so a program that started would fail or hang instead).
    for (const prog of ['orchestrator', 'pup', 'migrate', 'operator', 'tool-runner']) {
      const help = await holt([prog, '--help'], {
        ok: true,
        timeout: 20_000,
        env: { REDIS_URL: 'redis://127.0.0.1:1', DATABASE_URL: 'postgres://x@127.0.0.1:1/db' },
      });
      expect(help.stdout).toContain(`Usage: holt ${prog}`);
    }
    const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;
    expect((await holt(['orchestrator', '--version'], { ok: true })).stdout.trim()).toBe(version);
    expect((await holt(['--version'], { ok: true })).stdout.trim()).toBe(version);
  });

  it("accepts Holt's controller/worker holt.yml and prints manifests", async () => {
    const f = join(scratch, 'controller.yml');
    writeFileSync(
      f,
      `version: "1.0"
agents:
  CoderController:
    mode: "controller"
    image: "example-git-agent:latest"
    command: ["/app/pup"]
    bidding_strategy: "exclusive"
    worker: {image: "example-git-agent:latest", max_concurrent: 2, command: ["/app/run.sh"], workspace: {mode: rw}}
`,
    );
    const r = await holt(['convert', f, '--name', 'ctl'], { ok: true });
    expect(r.stdout).toContain('kind: WorkerPool');
    expect(r.stdout).toContain('maxConcurrent: 2');
  });

  it('a malformed file gets a message naming the field, exit 2, and starts nothing', async () => {
    const f = join(scratch, 'bad.yml');
    writeFileSync(f, 'version: "1.0"\nagents:\n  Coder: {image: x, bidding_strategy: exclusive}\n');
    const r = await holt(['up', '-f', f, '--name', 'bad']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('agents.Coder.command: required');
    const list = JSON.parse((await holt(['list', '--json'], { ok: true })).stdout) as { name: string }[];
    expect(list.map((i) => i.name)).not.toContain('bad');
  });

  it('up rolls everything back when an agent never becomes healthy (--timeout reaches the supervisor)', async () => {
    const dir = join(scratch, 'unhealthy');
    cpSync(join(ROOT, 'examples', 'demo'), dir, { recursive: true });
    writeFileSync(
      join(dir, 'holt.yml'),
      `version: "2"
agents:
  Sick:
    command: ["node", "agents/finisher.mjs"]
    bidding_strategy: ignore
    health_check: {command: ["false"], interval: 1s}
`,
    );
    execFileSync('git', ['init', '-q'], { cwd: dir });
    // Long enough for the stores to start on a busy machine (then Sick's health is what fails), not more.
    const r = await holt(['up', '--name', 'sick', '--timeout', '20'], { cwd: dir });
    expect(r.code).not.toBe(0);
    // Sick is among those not healthy in time (under load the orchestrator may be named beside it).
    expect(r.stderr).toMatch(/failed to start: not healthy in time: [\w, -]*\bSick\b/);
    // …and what is known of it: alive or not, its restarts, the last line it logged.
    expect(r.stderr).toMatch(/^Sick \((pid \d+|not running), \d+ restarts\): \S/m);
    const s = state('sick');
    expect(s.status).toBe('failed');
    const pids = [s.supervisorPid, ...s.components.map((c) => c.pid), ...s.stores.map((x) => x.pid)];
    expect(s.stores.length).toBe(3);
    // The supervisor exits after its rollback (waited for: stopping three stores takes a while under
    // load); nothing it started survives it.
    await eventually('the supervisor to exit after its rollback', () => !isAlive(s.supervisorPid), {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    expect(pids.filter((p) => isAlive(p))).toEqual([]);
  });

  it('holt init: a project that runs as written (up, forage to its Greeting); a second init refuses', async () => {
    const dir = join(scratch, 'fresh');
    mkdirSync(dir);
    const git = (...a: string[]) => execFileSync('git', a, { cwd: dir });
    const outside = await holt(['init'], { cwd: dir });
    expect(outside.code).toBe(2);
    git('init', '-q');
    const first = await holt(['init'], { cwd: dir, ok: true });
    expect(first.stdout).toContain('holt.yml, agents/example-agent/run.sh');
    expect(statSync(join(dir, 'agents', 'example-agent', 'run.sh')).mode & 0o777).toBe(0o755);
    const again = await holt(['init'], { cwd: dir });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('already initialized (holt.yml,');
    git('add', '-A');
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'holt init');
    try {
      await holt(['up', '--name', 'fresh'], { cwd: dir, ok: true });
      const w = await holt(
        ['forage', '--name', 'fresh', '--goal', 'say hello', '--watch', '-o', 'jsonl', '--timeout', '90'],
        { cwd: dir, ok: true },
      );
      expect(w.stdout.trim().split('\n').at(-1)).toContain('workflow_completed');
      const trail = (await holt(['hoard', '--name', 'fresh', '-o', 'jsonl'], { cwd: dir, ok: true })).stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Artefact);
      expect(trail.map((a) => [a.type, a.produced_by_role, a.structural_type])).toEqual([
        ['GoalDefined', 'user', 'Standard'],
        ['Greeting', 'Greeter', 'Terminal'],
      ]);
    } finally {
      await holt(['down', '--name', 'fresh'], { cwd: dir });
    }
  });

  it('forage refuses a dirty workspace unless --allow-dirty', async () => {
    const dir = newWorkspace('ws3');
    writeFileSync(join(dir, 'untracked.txt'), 'x');
    await holt(['up', '--name', 'dirty'], { cwd: dir, ok: true });
    try {
      const r = await holt(['forage', '--name', 'dirty', '--goal', 'x'], { cwd: dir });
      expect(r.code).toBe(4);
      expect(r.stderr).toContain('Git workspace is not clean');
      expect(r.stderr).toContain('untracked.txt');
      const ok = await holt(['forage', '--name', 'dirty', '--goal', 'x', '--allow-dirty'], {
        cwd: dir,
        ok: true,
      });
      expect(ok.stdout).toMatch(/Goal artefact created: [0-9a-f-]{36}/);
    } finally {
      await holt(['down', '--name', 'dirty']);
      await sleep(10);
    }
  });
});
