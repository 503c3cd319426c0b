import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { credentialHandoff } from '../../common/credentials.ts';
import { silentLogger } from '../../common/logger.ts';
import { toolEnvironment } from '../../common/secrets.ts';
import { LocalToolRunner } from './runner.ts';
import { SocketToolRunner, startRunnerServer } from './socket.ts';

let dir: string;
let server: Awaited<ReturnType<typeof startRunnerServer>>;
let socket: string;
const printEnv = ['node', '-e', 'process.stdout.write(JSON.stringify(process.env))'];
const req = (argv: string[], extra: Partial<Parameters<SocketToolRunner['run']>[0]> = {}) => ({
  argv,
  cwd: dir,
  stdin: '',
  timeoutMs: 10_000,
  maxBytes: 1 << 20,
  ...extra,
});
// What the pup (or the runner's container) has, and a tool must never see.
const holderEnv = {
  PATH: process.env.PATH,
  HOME: '/home/x',
  HOLT_AGENT_NAME: 'Writer',
  HOLT_TOOL_ENV: '["GITHUB_TOKEN"]',
  GITHUB_TOKEN: 'declared-for-tools',
  REDIS_URL: 'redis://pup:secret-password-123@127.0.0.1:1',
  DATABASE_URL: 'postgres://holt_app:secret@x/holt',
  OPENAI_API_KEY: 'sk-secret',
  AWS_SECRET_ACCESS_KEY: 'undeclared',
};

beforeAll(async () => {
  dir = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'runner-'));
  socket = join(dir, 'runner.sock');
  server = await startRunnerServer({ socket, env: holderEnv, log: silentLogger() });
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

describe('tool environment', () => {
  it('is an allowlist: system, contract, declared names, the tool’s own env and the call id', () => {
    const env = toolEnvironment(holderEnv, { TOOL_OWN: '1' }, 'call-1');
    expect(env).toEqual({
      PATH: process.env.PATH,
      HOME: '/home/x',
      HOLT_AGENT_NAME: 'Writer',
      GITHUB_TOKEN: 'declared-for-tools',
      TOOL_OWN: '1',
      HOLT_CALL_ID: 'call-1',
    });
  });

  it('locally, a tool run by the pup gets the same allowlist', async () => {
    const r = await new LocalToolRunner(holderEnv).run(req(printEnv, { callId: 'c-2' }));
    const env = JSON.parse(r.stdout) as Record<string, string>;
    expect(env.HOLT_CALL_ID).toBe('c-2');
    for (const k of ['REDIS_URL', 'DATABASE_URL', 'OPENAI_API_KEY', 'AWS_SECRET_ACCESS_KEY'])
      expect(env[k]).toBeUndefined();
  });
});

describe('socket tool runner (the agent container’s side)', () => {
  it('answers pings, runs a tool with the allowlist, and only its owner may connect', async () => {
    const runner = new SocketToolRunner(socket);
    await runner.ping();
    const r = await runner.run(req(printEnv, { env: { TOOL_OWN: 'x' }, callId: 'c-3' }));
    expect(r.exitCode).toBe(0);
    const env = JSON.parse(r.stdout) as Record<string, string>;
    expect(env).toMatchObject({ GITHUB_TOKEN: 'declared-for-tools', TOOL_OWN: 'x', HOLT_CALL_ID: 'c-3' });
    expect(env.REDIS_URL).toBeUndefined();
    expect(env.OPENAI_API_KEY).toBeUndefined();
    expect(statSync(socket).mode & 0o077).toBe(0);
  });

  it('reports timeouts, overflows and a missing command as results, like a local run', async () => {
    const runner = new SocketToolRunner(socket);
    const slow = await runner.run(req(['sleep', '5'], { timeoutMs: 200 }));
    expect(slow.timedOut).toBe(true);
    const big = await runner.run(
      req(['node', '-e', 'process.stdout.write("x".repeat(5000))'], { maxBytes: 100 }),
    );
    expect(big.overflow).toBe(true);
    const missing = await runner.run(req(['/no/such/tool']));
    expect(missing.spawnError).toMatch(/ENOENT/);
    // spawn throws on a NUL byte rather than failing the child: still a result, and the runner lives on.
    const nul = await runner.run(req(['echo', 'a\u0000b']));
    expect(nul.spawnError).toMatch(/null bytes/);
    expect((await runner.run(req(['echo', 'still here']))).stdout).toBe('still here\n');
    expect((await new LocalToolRunner({}).run(req(['echo', 'a\u0000b']))).spawnError).toMatch(/null bytes/);
  });

  it('hanging up kills the run and everything it started', async () => {
    const marker = join(dir, 'still-alive');
    const ac = new AbortController();
    const run = new SocketToolRunner(socket).run(req(['sh', '-c', `sleep 1 && touch ${marker}`]), ac.signal);
    setTimeout(() => ac.abort(), 200);
    const r = await run;
    expect(r.signal).toBe('SIGKILL');
    await new Promise((res) => setTimeout(res, 1500));
    expect(existsSync(marker)).toBe(false);
  });

  it('a malformed request gets an error reply, never a crash', async () => {
    const reply = await new Promise<string>((resolve) => {
      const s = createConnection(socket, () => s.write('{"op":"run","request":{"argv":[]}}\n'));
      let b = '';
      s.on('data', (d) => {
        b += d.toString();
      });
      s.on('end', () => resolve(b));
    });
    expect(JSON.parse(reply)).toMatchObject({ op: 'error' });
    await new SocketToolRunner(socket).ping();
  });

  it('a runner that is not there is an error of the runner, not a tool failure', async () => {
    await expect(new SocketToolRunner(join(dir, 'nobody.sock')).run(req(['true']))).rejects.toThrow(
      /tool runner/,
    );
  });

  it('a runner that takes a call and never answers: every call ends at its deadline, none hangs', async () => {
    const mute = join(dir, 'mute.sock');
    const held: Socket[] = [];
    const silent = createServer((s) => {
      held.push(s);
      s.resume().on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(mute, () => resolve()));
    try {
      const r = new SocketToolRunner(mute, 300);
      // A file operation past its deadline is the model's error; the others are the runner's.
      expect(await r.file({ op: 'read', root: dir, path: 'x' })).toEqual({
        ok: false,
        error: 'the tool runner did not answer the file request within 300 ms',
      });
      await expect(r.commit({ root: dir, rev: 'a'.repeat(40) })).rejects.toThrow(/did not answer the commit/);
      await expect(r.ping()).rejects.toThrow(/did not answer the ping/);
      await expect(r.run(req(['true'], { timeoutMs: 1 }))).rejects.toThrow(/did not answer the run/);
      // Each call hung up: the runner is not left holding its connections.
      await eventually(
        'the runner side of each call closed',
        () => held.length === 4 && held.every((s) => s.destroyed),
      );
    } finally {
      for (const s of held) s.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});

describe('credential descriptor', () => {
  it('a child gets the credentials on fd 3, not in its environment', async () => {
    const h = credentialHandoff({ REDIS_URL: 'redis://pup:pw-on-the-fd-123@h:1' });
    const code = `
      import { withCredentials } from ${JSON.stringify(join(import.meta.dirname, '../../common/credentials.ts'))};
      import { readFileSync } from 'node:fs';
      const env = withCredentials(process.env);
      const environ = readFileSync('/proc/self/environ', 'latin1');
      process.stdout.write(JSON.stringify({ got: env.REDIS_URL, inProcessEnv: process.env.REDIS_URL ?? null, inEnviron: environ.includes('pw-on-the-fd') }));`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      env: { PATH: process.env.PATH, ...h.env },
      stdio: ['ignore', 'pipe', 'inherit', 'pipe'],
    });
    (child.stdio[3] as NodeJS.WritableStream).end(h.payload);
    let out = '';
    child.stdout?.on('data', (d) => {
      out += d;
    });
    await new Promise((r) => child.on('exit', r));
    expect(JSON.parse(out)).toEqual({
      got: 'redis://pup:pw-on-the-fd-123@h:1',
      inProcessEnv: null,
      inEnviron: false,
    });
  });
});
