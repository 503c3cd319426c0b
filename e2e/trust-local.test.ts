import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InstanceState } from '../src/local/instance.ts';
import { commitWorkspace } from './git-workspace.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const PROBE = join(ROOT, 'e2e', 'probe', 'credential-probe.mjs');
const DUMP = join(ROOT, 'e2e', 'probe', 'env-dump.mjs');
const NAME = 'trust';
const LLM_KEY = 'sk-probe-llm-key-0123456789abcdef';

let scratch: string;
let ws: string;
let env: NodeJS.ProcessEnv;
const files = { report: '', targets: '', bids: '', health: '' };

async function holt(args: string[], extra: NodeJS.ProcessEnv = {}) {
  const r = await run(HOLT, args, { cwd: ws, env: { ...env, ...extra }, maxBuffer: 20 * 1024 * 1024 });
  return r.stdout;
}

type Report = {
  seen: { environ: number; cmdline: number };
  texts: string;
  attempts: { store: string; target: string; user: string; ok: boolean; error?: string }[];
};

function probe(cfg: object, extraEnv: NodeJS.ProcessEnv = {}): Report {
  execFileSync('node', [PROBE, JSON.stringify(cfg)], { env: { PATH: process.env.PATH, ...extraEnv } });
  return JSON.parse(readFileSync((cfg as { report: string }).report, 'utf8')) as Report;
}

beforeAll(() => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'trust-'));
  ws = join(scratch, 'ws');
  mkdirSync(ws);
  for (const k of Object.keys(files) as (keyof typeof files)[]) files[k] = join(scratch, `${k}.json`);
  const cfg = JSON.stringify({
    report: files.report,
    targetsFile: files.targets,
    pgModule: join(ROOT, 'package.json'),
  });
  const yml = [
    'version: "2"',
    'orchestrator: {bid_timeout: 120s}',
    'agents:',
    '  Prober:',
    `    command: ["node", ${JSON.stringify(PROBE)}, ${JSON.stringify(cfg)}]`,
    `    bid_script: ["node", ${JSON.stringify(DUMP)}, ${JSON.stringify(files.bids)}, "exclusive"]`,
    `    health_check: {command: ["node", ${JSON.stringify(DUMP)}, ${JSON.stringify(files.health)}], interval: 1s}`,
    '    environment: ["DECLARED_FOR_TOOLS=visible"]',
  ].join('\n');
  writeFileSync(join(ws, 'holt.yml'), `${yml}\n`);
  commitWorkspace(ws);
  env = { ...process.env, HOLT_HOME: join(scratch, 'home'), NO_COLOR: '1' };
});

afterAll(async () => {
  if (env) await holt(['down', '--name', NAME]).catch(() => undefined);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('local mode: a tool that looks for credentials finds none and reaches no store', () => {
  it('tool, bid script and health check see no secret; every store refuses whatever they found', async () => {
    // The model key in the environment of `holt up` only: a shell that keeps it exported is readable by
    // any process of the same user, tools included (docs/security.md, residual risks).
    await holt(['up', '--name', NAME], { OPENAI_API_KEY: LLM_KEY });
    const dir = join(env.HOLT_HOME as string, 'instances', NAME);
    const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as InstanceState;
    const hostPort = (u: string | undefined) => new URL(u as string).host;
    const targets = {
      redis: [hostPort(state.redisUrl)],
      nats: [hostPort(state.natsUrl)],
      postgres: [hostPort(state.postgresUrl)],
    };
    writeFileSync(files.targets, JSON.stringify(targets));
    // Every secret of the instance: each principal's password per store, the superuser's, the model key.
    const stored = JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8')) as Record<
      string,
      Record<string, string>
    >;
    const secrets = [
      ...Object.values(stored).flatMap((s) => Object.values(s)),
      new URL(state.postgresUrl as string).password,
      LLM_KEY,
    ];
    // Redis and NATS: admin, orchestrator, pup, operator, tool; Postgres: owner, orchestrator, pup,
    // operator; and two keys.
    expect(secrets.length).toBe(5 + 5 + 4 + 2);
    // Only the owner may read what holds them.
    for (const f of ['state.json', 'secrets.json']) expect(statSync(join(dir, f)).mode & 0o077).toBe(0);

    const out = await holt([
      'forage',
      '--name',
      NAME,
      '--goal',
      'look around',
      '--watch',
      '-o',
      'jsonl',
      '--timeout',
      '120',
    ]);
    expect(out).toContain('workflow_completed');
    const report = JSON.parse(readFileSync(files.report, 'utf8')) as Report;
    // It did look: its own environment, other processes' environ and cmdline, and it tried the stores.
    expect(report.texts).toContain('HOLT_AGENT_NAME=Prober');
    expect(report.texts).toContain('DECLARED_FOR_TOOLS=visible');
    expect(report.texts).toMatch(/HOLT_CALL_ID=[0-9a-f-]{36}/);
    expect(report.seen.cmdline).toBeGreaterThan(3);
    // The environ of its own namespace's processes only: its runner starts in a user namespace of its
    // own (the locked read-only workspace view), so the others' (the pup's, `holt up`'s) are closed to it.
    expect(report.seen.environ).toBeGreaterThan(0);
    expect(report.seen.environ).toBeLessThan(report.seen.cmdline);
    expect(new Set(report.attempts.map((a) => a.store))).toEqual(new Set(['redis', 'nats', 'postgres']));
    for (const s of secrets) expect(report.texts).not.toContain(s);
    expect(report.attempts.filter((a) => a.ok)).toEqual([]);

    // `holt status --json` shows where the stores are, never their passwords.
    const status = await holt(['status', '--name', NAME, '--json']);
    expect(status).toContain('"redisUrl": "redis://admin:***@127.0.0.1');
    for (const s of secrets) expect(status).not.toContain(s);

    const envs = (f: string) =>
      readFileSync(f, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, string>);
    for (const [what, file] of [
      ['bid script', files.bids],
      ['health check', files.health],
    ] as const) {
      const seen = envs(file);
      expect(seen.length, what).toBeGreaterThan(0);
      for (const e of seen) {
        for (const k of ['REDIS_URL', 'NATS_URL', 'DATABASE_URL', 'OPENAI_API_KEY', 'HOLT_CREDENTIALS_FD'])
          expect(e[k], `${what}: ${k}`).toBeUndefined();
        expect(e.DECLARED_FOR_TOOLS).toBe('visible');
        for (const s of secrets) expect(JSON.stringify(e)).not.toContain(s);
      }
    }
    expect(envs(files.bids)[0]?.HOLT_CALL_ID).toMatch(/^bid:/);

    // The control: given one leaked credential, the same probe gets into every store.
    const leaked = {
      REDIS_URL: `redis://pup:${stored.redis?.pup}@${targets.redis[0]}`,
      NATS_URL: `nats://pup:${stored.nats?.pup}@${targets.nats[0]}`,
      DATABASE_URL: `postgres://holt_pup:${stored.postgres?.pup}@${targets.postgres[0]}/holt`,
    };
    const control = probe(
      { report: join(scratch, 'control.json'), targets, pgModule: join(ROOT, 'package.json') },
      leaked,
    );
    expect(new Set(control.attempts.filter((a) => a.ok).map((a) => a.store))).toEqual(
      new Set(['redis', 'nats', 'postgres']),
    );
  }, 240_000);
});
