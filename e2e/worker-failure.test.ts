import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artefact } from '../src/blackboard/types.ts';
import type { InstanceState } from '../src/local/instance.ts';
import { eventually } from '../test/harness/wait.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * A worker that dies with a claim in hand (its tool kills it, as an out-of-memory kill would): the
 * supervisor reports the exit, the orchestrator frees the claim at once instead of waiting for the
 * lease, tries again, and when the tries run out writes Holt's WorkerFailure with the exit and the
 * worker's last log lines, credentials cut out. Real CLI, real stores, real processes.
 */
const run = promisify(execFile);
const HOLT = join(resolve(import.meta.dirname, '..'), 'bin', 'holt');

let scratch: string;
let ws: string;
let env: NodeJS.ProcessEnv;

const holt = (args: string[]) => run(HOLT, args, { cwd: ws, env, maxBuffer: 20 << 20 });

beforeAll(() => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'workerfail-'));
  ws = join(scratch, 'ws');
  mkdirSync(ws);
  writeFileSync(
    join(ws, 'holt.yml'),
    `version: "2"
agents:
  Crasher:
    command: ["sh", "crash.sh"]
    bid_script: ["sh", "-c", "grep -q GoalDefined && echo exclusive || echo ignore"]
    workspace: {mode: rw}
    worker: {command: ["sh", "crash.sh"], max_concurrent: 1, workspace: {mode: rw}}
`,
  );
  // The tool kills the worker running it: the worker dies holding the claim, every time.
  writeFileSync(
    join(ws, 'crash.sh'),
    'cat >/dev/null\necho "taking the worker down" >&2\nkill -9 $PPID\nsleep 30\n',
  );
  commitWorkspace(ws);
  env = { ...process.env, HOLT_HOME: join(scratch, 'home'), NO_COLOR: '1' };
});

afterAll(async () => {
  await holt(['down', '--name', 'crashy']).catch(() => undefined);
  await run(HOLT, ['down', '--name', 'scaled'], { env }).catch(() => undefined);
  rmSync(scratch, { recursive: true, force: true });
});

describe('a worker that dies with a claim', () => {
  it('is reported, retried at once, and ends as a WorkerFailure with its exit and logs', async () => {
    await holt(['up', '--name', 'crashy', '--timeout', '90']);
    await holt(['forage', '--name', 'crashy', '--goal', 'crash please']);
    const logOf = (name: string) =>
      readFileSync(join(env.HOLT_HOME!, 'instances', 'crashy', 'logs', `${name}.log`), 'utf8');
    // If it never comes, what the orchestrator said last is in the error.
    const failure = await eventually(
      'the WorkerFailure',
      async () => {
        const out = (await holt(['hoard', '--name', 'crashy', '-o', 'jsonl'])).stdout.trim();
        return out
          .split('\n')
          .map((l) => JSON.parse(l) as Artefact)
          .find((a) => a.structural_type === 'Failure');
      },
      {
        timeoutMs: 240_000,
        intervalMs: 200,
        describe: () =>
          `orchestrator log, last lines:\n${logOf('orchestrator').split('\n').slice(-40).join('\n')}`,
      },
    );
    expect(failure?.type).toBe('WorkerFailure');
    expect(failure?.produced_by_role).toBe('Crasher');
    const payload = failure?.payload ?? '';
    expect(payload).toMatch(/^Worker container exited with code 137 \(SIGKILL\)\n\nLogs:\n/);
    // The worker's own last lines (its pup's log), and never a credential of the instance.
    const logs = payload.split('\n\nLogs:\n')[1] ?? '';
    expect(logs.split('\n').length).toBeLessThanOrEqual(100);
    expect(logs).toContain('"component":"pup"');
    const state = JSON.parse(
      readFileSync(join(env.HOLT_HOME!, 'instances', 'crashy', 'state.json'), 'utf8'),
    ) as InstanceState;
    const secrets = JSON.parse(
      readFileSync(join(env.HOLT_HOME!, 'instances', 'crashy', 'secrets.json'), 'utf8'),
    ) as Record<string, Record<string, string>>;
    for (const group of Object.values(secrets))
      for (const pw of Object.values(group)) expect(payload).not.toContain(pw);
    expect(payload).not.toContain(state.redisUrl);

    // Each death was acted on when reported, not when its lease ran out: three tries, three reports.
    const orchestratorLog = readFileSync(
      join(env.HOLT_HOME!, 'instances', 'crashy', 'logs', 'orchestrator.log'),
      'utf8',
    );
    const exited = orchestratorLog.split('\n').filter((l) => l.includes('"event_type":"worker_exited"'));
    expect(exited.length).toBe(3);
    for (const l of exited)
      expect(JSON.parse(l)).toMatchObject({ role: 'Crasher', exit_code: 137, signal: 'SIGKILL' });
    const owners = new Set(exited.map((l) => (JSON.parse(l) as { owner: string }).owner));
    expect(owners.size).toBe(3);
    const status = JSON.parse((await holt(['status', '--name', 'crashy', '--json'])).stdout) as {
      claims: Record<string, number>;
    };
    expect(status.claims.terminated).toBe(1);
  }, 300_000);

  it('holt scale: workers start and stop, their read-only tool runners with them, the controller stays', async () => {
    const dir = join(scratch, 'scaled');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'done.sh'),
      'cat >/dev/null\necho \'{"artefact_type":"Done","artefact_payload":"ok","summary":"ok","structural_type":"Terminal"}\'\n',
    );
    writeFileSync(
      join(dir, 'holt.yml'),
      `version: "2"
agents:
  Scaled:
    command: ["sh", "done.sh"]
    bid_script: ["sh", "-c", "grep -q GoalDefined && echo exclusive || echo ignore"]
    worker: {command: ["sh", "done.sh"], max_concurrent: 1}
`,
    );
    commitWorkspace(dir);
    const inDir = (args: string[]) => run(HOLT, args, { cwd: dir, env, maxBuffer: 20 << 20 });
    const names = () =>
      (
        JSON.parse(
          readFileSync(join(env.HOLT_HOME!, 'instances', 'scaled', 'state.json'), 'utf8'),
        ) as InstanceState
      ).components
        .map((c) => c.name)
        .sort();
    await inDir(['up', '--name', 'scaled', '--timeout', '90']);
    try {
      // The workspace is ro by default: each worker has its read-only tool runner beside it.
      expect(names()).toEqual([
        'Scaled',
        'Scaled-tools',
        'Scaled-worker-0',
        'Scaled-worker-0-tools',
        'orchestrator',
      ]);
      expect((await inDir(['scale', 'Scaled', '3', '--name', 'scaled'])).stdout).toContain(
        'Scaled: 3 worker(s)',
      );
      // The state file follows the supervisor: the last runner may land in it just after the answer.
      for (let i = 0; i < 100 && names().filter((n) => n.includes('-worker-')).length < 6; i++)
        await sleep(100);
      expect(names()).toEqual(
        expect.arrayContaining([
          'Scaled-worker-1',
          'Scaled-worker-1-tools',
          'Scaled-worker-2',
          'Scaled-worker-2-tools',
        ]),
      );
      await inDir(['scale', 'Scaled', '0', '--name', 'scaled']);
      // Their runners go with them.
      for (let i = 0; i < 100 && names().some((n) => n.includes('-worker-')); i++) await sleep(100);
      expect(names()).toEqual(['Scaled', 'Scaled-tools', 'orchestrator']);
    } finally {
      await inDir(['down', '--name', 'scaled']).catch(() => undefined);
    }
  }, 300_000);
});
