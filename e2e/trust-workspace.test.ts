import { execFile, execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artefact } from '../src/blackboard/types.ts';
import { VERSION } from '../src/common/version.ts';
import { detectEngine } from '../src/local/engine.ts';
import { eventually } from '../test/harness/wait.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * The workspace is hostile input to every Holt process (docs/security.md). A tool with a read-write
 * workspace plants, in .git, a core.fsmonitor, a partial clone whose promisor remote has a planted
 * uploadpack, a filter driver and hooks (test/fixtures/agents/git-plant.mjs), each of which dumps its
 * environment to .git/holt-plant-dump, then returns CodeCommits: `:README`, a missing full id, its
 * real full id. Under `holt up --no-containers` and under `holt up` with the tool in a container of the
 * runtime image (node and git), the real pup, runner and CLI: the dump never appears, and the control (a
 * naive `git status` by the tool) shows the plant was armed.
 */
const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const PLANT = join(ROOT, 'test', 'fixtures', 'agents', 'git-plant.mjs');
const RUNTIME = `ghcr.io/holt-k8s/runtime:${VERSION}`;
const LLM_KEY = 'sk-plant-llm-key-0123456789abcdef';

let scratch: string;
let env: NodeJS.ProcessEnv;
/** The instance and workspace the current test drives. */
let NAME = '';
let ws = '';

async function holt(args: string[], extra: NodeJS.ProcessEnv = {}) {
  const r = await run(HOLT, args, { cwd: ws, env: { ...env, ...extra }, maxBuffer: 20 << 20 });
  return r.stdout;
}

async function trail(): Promise<Artefact[]> {
  const out = await holt(['hoard', '--name', NAME, '-o', 'jsonl']);
  return out
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Artefact);
}

/** Forages `goal` (the plant's mode) and waits for the one artefact the agent makes of it. */
async function forage(goal: string): Promise<Artefact> {
  await holt(['forage', '--name', NAME, '--goal', goal, '--allow-dirty']);
  return eventually(
    `the planter's artefact for ${goal}`,
    async () => {
      const all = await trail();
      const g = all.find((a) => a.type === 'GoalDefined' && a.payload === goal);
      return g && all.find((a) => a.source_artefacts.includes(g.id) && a.produced_by_role === 'Planter');
    },
    { timeoutMs: 120_000 },
  );
}

/** A workspace whose one agent is the planter: from this machine, or from `image` (the tool's copy inside). */
function workspace(name: string, image?: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir);
  let command = `["node", ${JSON.stringify(PLANT)}, "goal"]`;
  if (image) {
    copyFileSync(PLANT, join(dir, 'git-plant.mjs'));
    command = '["node", "git-plant.mjs", "goal"]';
  }
  const onGoals =
    "let s='';process.stdin.on('data',(d)=>{s+=d}).on('end',()=>process.stdout.write(JSON.parse(s).type==='GoalDefined'?'exclusive':'ignore'))";
  const yml = [
    'version: "2"',
    'orchestrator: {bid_timeout: 120s}',
    'agents:',
    '  Planter:',
    ...(image ? [`    image: ${image}`] : []),
    `    command: ${command}`,
    `    bid_script: ["node", "-e", ${JSON.stringify(onGoals)}]`,
    '    workspace: {mode: rw}',
  ].join('\n');
  writeFileSync(join(dir, 'holt.yml'), `${yml}\n`);
  commitWorkspace(dir);
  // The runtime image's user (1000) writes the workspace, as an agent pod's does.
  if (image) execFileSync('chown', ['-R', '1000:1000', dir]);
  return dir;
}

beforeAll(() => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'wsplant-'));
  env = { ...process.env, HOLT_HOME: join(scratch, 'home'), NO_COLOR: '1' };
});

afterAll(async () => {
  for (const [name, dir] of [
    ['wsplant', 'host'],
    ['wsplant-c', 'container'],
  ]) {
    ws = join(scratch ?? '', dir as string);
    if (env && existsSync(ws)) await holt(['down', '--name', name as string]).catch(() => undefined);
  }
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** The scenario, in either mode. `control`: also run the plant from this machine (its paths are ours). */
async function planted(name: string, dir: string, up: string[], control: boolean) {
  NAME = name;
  ws = dir;
  await holt(['up', '--name', NAME, ...up], { OPENAI_API_KEY: LLM_KEY });
  const dump = join(ws, '.git', 'holt-plant-dump');
  const secrets = [
    ...Object.values(
      JSON.parse(
        readFileSync(join(env.HOLT_HOME as string, 'instances', NAME, 'secrets.json'), 'utf8'),
      ) as Record<string, Record<string, string>>,
    ).flatMap((s) => Object.values(s)),
    LLM_KEY,
  ];

  const good = await forage('head');
  expect(good).toMatchObject({ type: 'CodeCommit', payload: expect.stringMatching(/^[0-9a-f]{40}$/) });
  expect(existsSync(join(ws, '.git', 'plant.sh'))).toBe(true);
  // The CLI reads the planted workspace too: `holt forage` refuses it as dirty, running nothing.
  await expect(holt(['forage', '--name', NAME, '--goal', 'name'])).rejects.toThrow(/not clean/);
  for (const [goal, reason] of [
    ['name', /git commit validation failed for ":README": not a full commit id/],
    ['missing', /git commit validation failed for "1{40}"/],
  ] as const) {
    const f = await forage(goal);
    expect(f).toMatchObject({ structural_type: 'Failure', type: 'ToolExecutionFailure' });
    expect(JSON.parse(f.payload).reason).toMatch(reason);
  }
  expect(existsSync(dump)).toBe(false);

  // The tool's own report: no dump, and its naive `git status` (the control) does run the plant.
  const report = await forage('report');
  expect(report.type).toBe('PlantReport');
  expect(JSON.parse(report.payload)).toEqual({ dump: null, control: true });
  // What the control dumped is the tool's environment: no credential of the Holt's.
  const seen = readFileSync(dump, 'utf8');
  expect(seen).toContain('PLANT_CONTROL=naive');
  for (const s of secrets) expect(seen).not.toContain(s);
  if (!control) return;
  // And the control outside Holt: the same planted repository runs the plant for a naive caller.
  rmSync(dump);
  try {
    execFileSync('git', ['cat-file', '-e', ':README'], { cwd: ws, stdio: 'ignore' });
  } catch {
    // the plant exits 1
  }
  expect(readFileSync(dump, 'utf8')).toMatch(/planted ran/);
}

describe('local mode: nothing a tool plants in .git runs in a Holt process', () => {
  it('on this machine (--no-containers): names refused, ids checked by a hardened git in the runner; the plant never runs', async () => {
    await planted('wsplant', workspace('host'), ['--no-containers'], true);
  }, 600_000);

  it('the tool in a container of the runtime image: the same', async () => {
    const engine = await detectEngine(process.env);
    if (!engine) throw new Error('no container engine answers: `make setup` starts one');
    await planted('wsplant-c', workspace('container', RUNTIME), [], false);
  }, 600_000);
});
