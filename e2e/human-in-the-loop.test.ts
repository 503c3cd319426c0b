import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InstanceState } from '../src/local/instance.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const FIX = join(ROOT, 'test', 'fixtures', 'agents');

let ws: string;
let scratch: string;
let env: NodeJS.ProcessEnv;

function instanceState(name: string): InstanceState {
  return JSON.parse(
    readFileSync(join(env.HOLT_HOME!, 'instances', name, 'state.json'), 'utf8'),
  ) as InstanceState;
}

async function holt(args: string[]) {
  try {
    const r = await run(HOLT, args, { cwd: ws, env });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

beforeAll(async () => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'hitl-'));
  ws = join(scratch, 'ws');
  env = { ...process.env, HOLT_HOME: join(scratch, 'home'), NO_COLOR: '1' };
  execFileSync('mkdir', ['-p', ws]);
  writeFileSync(
    join(ws, 'holt.yml'),
    `version: "2"
agents:
  Asker:
    command: ["node", "${join(FIX, 'asker.mjs')}"]
    bid_script: ["node", "${join(FIX, 'bid-types.mjs')}", "GoalDefined", "exclusive"]
`,
  );
  execFileSync('git', ['init', '-q'], { cwd: ws });
  execFileSync('git', ['add', '-A'], { cwd: ws });
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'init'], { cwd: ws });
  const up = await holt(['up', '--name', 'hitl']);
  if (up.code !== 0) throw new Error(up.stderr);
});

afterAll(async () => {
  await holt(['down', '--name', 'hitl']);
  rmSync(scratch, { recursive: true, force: true });
});

describe('human in the loop, logs and history from the CLI', () => {
  it('questions --wait surfaces a Question; answer resumes the asking agent to a Terminal', async () => {
    const goal = await holt(['forage', '--name', 'hitl', '--goal', 'paint the shed']);
    expect(goal.code).toBe(0);
    const q = await holt(['questions', '--name', 'hitl', '--wait', '-o', 'jsonl']);
    const question = JSON.parse(q.stdout.trim().split('\n')[0]!) as {
      id: string;
      payload: string;
      produced_by_role: string;
    };
    expect(question.payload).toBe('Which colour for: paint the shed?');
    expect(question.produced_by_role).toBe('Asker');

    // Answer only once the watcher is subscribed, or a fast Terminal could slip past it.
    const redis = new Redis(instanceState('hitl').redisUrl!);
    const channel = 'holt:hitl:artefact_events';
    const subscribers = async () => Number(((await redis.pubsub('NUMSUB', channel)) as [string, number])[1]);
    const before = await subscribers();
    const watching = holt([
      'watch',
      '--name',
      'hitl',
      '--exit-on-completion',
      '-o',
      'jsonl',
      '--timeout',
      '60',
    ]);
    while ((await subscribers()) <= before) await new Promise((r) => setTimeout(r, 50));
    redis.disconnect();
    const a = await holt(['answer', question.id.slice(0, 8), 'green', '--name', 'hitl']);
    expect(a.stdout).toMatch(/Answer artefact created: [0-9a-f-]{36} \(answers /);
    const w = await watching;
    expect(w.code).toBe(0);
    const done = w.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; data: { payload?: string } })
      .find((e) => e.event === 'artefact_created' && e.data.payload === 'answer was: green');
    expect(done).toBeDefined();
    expect((await holt(['questions', '--name', 'hitl'])).stdout).toContain('No open questions.');
  });

  it('answer refuses an artefact that is not a question, and an ambiguous or unknown id', async () => {
    const list = (await holt(['hoard', '--name', 'hitl', '-o', 'jsonl'])).stdout.trim().split('\n');
    const goal = JSON.parse(list[0]!) as { id: string };
    expect((await holt(['answer', goal.id, 'x', '--name', 'hitl'])).stderr).toContain(
      'is not a Question artefact',
    );
    const unknown = await holt(['answer', 'ffffffff', 'x', '--name', 'hitl']);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toContain('no artefacts found matching');
    expect((await holt(['hoard', 'abc', '--name', 'hitl'])).stderr).toContain('at least 6 characters');
  });

  it('watch --since replays history; logs shows a component log; unknown component is exit 3', async () => {
    const w = await holt(['watch', '--name', 'hitl', '--since', '10m', '--until', '0s', '-o', 'jsonl']);
    expect(w.code).toBe(0);
    const events = w.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { event: string }).event);
    expect(events).toContain('artefact_created');
    expect(events).toContain('claim_created');
    expect(events).toContain('claim_granted');
    const logs = await holt(['logs', 'orchestrator', '--name', 'hitl', '--lines', '5']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain('"component":"orchestrator"');
    const bad = await holt(['logs', 'Nobody', '--name', 'hitl']);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toContain('known: orchestrator, Asker');
  });
});
