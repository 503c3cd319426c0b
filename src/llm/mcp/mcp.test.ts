import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { join } from 'node:path';
import { context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../test/harness/ports.ts';
import { promlint } from '../../../test/harness/promlint.ts';
import { makeTempDir, removeDir } from '../../../test/harness/tmp.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { McpServer } from '../../api/agent.ts';
import { silentLogger } from '../../common/logger.ts';
import { Scrubber } from '../../common/secrets.ts';
import { LocalToolRunner, type ToolRunner } from '../../pup/runner/runner.ts';
import { SocketToolRunner, startRunnerServer } from '../../pup/runner/socket.ts';
import { tracingSettings } from '../../telemetry/settings.ts';
import { startTracing } from '../../telemetry/tracing.ts';
import { McpHub } from './hub.ts';
import {
  AUTH_SERVER,
  EVERYTHING,
  FILESYSTEM,
  httpEverything,
  listening,
  stopChild as stop,
  TINY,
} from './mcp.testkit.ts';
import { resultText } from './results.ts';

// MCP servers written by others (server-everything, server-filesystem), run for real over stdio (the
// local runner and the runner socket) and Streamable HTTP, and a tiny server of ours that hangs, dies
// mid-call or records cancellations.

/** What the pup holds and no MCP server may see. */
const pupEnv = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  DATABASE_URL: 'postgres://holt:store-secret-pw@127.0.0.1:1/holt',
  REDIS_URL: 'redis://:redis-secret-pw@127.0.0.1:1',
  HOLT_LLM_API_KEY: 'sk-model-key-secret',
  PASSED_ON: 'declared-value',
  NOT_DECLARED: 'undeclared-value',
};

let ws: string;
const hubs: McpHub[] = [];
// The context manager (no exporter): a span made active stays active across the call's awaits.
const tracing = startTracing('pup', tracingSettings({}), silentLogger());
beforeAll(() => {
  ws = makeTempDir('mcp-');
  writeFileSync(join(ws, 'notes.txt'), 'inside the workspace');
});
afterAll(async () => {
  await Promise.all(hubs.map((h) => h.close()));
  removeDir(ws);
  await tracing.shutdown();
});

const spec = (s: Record<string, unknown>) => McpServer.parse(s);
async function hubOf(
  servers: Record<string, unknown>[],
  runner: ToolRunner = new LocalToolRunner(pupEnv),
  env = {},
  registry?: Registry,
) {
  const hub = new McpHub(
    servers.map(spec),
    {
      runner,
      workspace: ws,
      env,
      log: silentLogger(),
      scrub: new Scrubber([]),
    },
    registry,
  );
  hubs.push(hub);
  await hub.start();
  return hub;
}
const textOf = (o: { ok: boolean; result?: Record<string, unknown>; error?: string }) =>
  o.ok ? resultText(o.result ?? {}, 8000).text : `failed: ${o.error}`;

describe('server-everything over stdio, run by the local runner', () => {
  let hub: McpHub;
  beforeAll(async () => {
    hub = await hubOf([
      { name: 'everything', command: [EVERYTHING], env: ['PASSED_ON', 'DATABASE_URL'], timeoutSeconds: 10 },
    ]);
  });

  it('discovers its tools as server__tool, with object schemas, and calls one', async () => {
    expect(hub.problems()).toEqual([]);
    const echo = hub.tool('everything__echo');
    expect(echo?.schema.type).toBe('object');
    const names = hub.specs().map((s) => s.function.name);
    expect(names).toEqual(
      expect.arrayContaining(['everything__get-sum', 'mcp_read_resource', 'mcp_get_prompt']),
    );
    expect(textOf(await hub.server('everything')!.call('echo', { message: 'hi' }))).toBe('Echo: hi');
  });

  it('reads its tool list again on notifications/tools/list_changed', async () => {
    // server-everything registers a tool once the session is initialized, which announces the change.
    const s = hub.server('everything')!;
    await eventually('a list_changed notice handled', () => s.listChanges > 0);
    expect(hub.tool('everything__simulate-research-query')).toBeDefined();
  });

  it('turns isError into a tool error, and keeps an image as a reference, never its bytes', async () => {
    const s = hub.server('everything')!;
    const bad = await s.call('get-sum', { a: 'x' });
    expect(bad.ok && resultText(bad.result, 8000)).toMatchObject({ isError: true });
    const img = textOf(await s.call('get-tiny-image', {}));
    expect(img).toMatch(/\[image image\/png, \d+ bytes: kept by the server, not shown\]/);
    expect(img).not.toContain('iVBOR');
  });

  it('reports progress notifications of a long call', async () => {
    const seen: number[] = [];
    const r = await hub.server('everything')!.call(
      'trigger-long-running-operation',
      { duration: 1, steps: 3 },
      {
        onProgress: (p) => seen.push(p.progress),
      },
    );
    expect(textOf(r)).toContain('Long running operation completed');
    expect(seen.length).toBeGreaterThan(0);
    expect(seen).toEqual([...seen].sort());
  });

  it('gives its prompts as templates', async () => {
    const s = hub.server('everything')!;
    expect(s.prompts.map((p) => p.name)).toContain('args-prompt');
    const r = await s.getPrompt('args-prompt', { city: 'Lyon' });
    expect(r.ok && JSON.stringify(r.result)).toContain('Lyon');
  });

  it('runs with an allowlisted environment: declared names, never a credential of the pup', async () => {
    const env = JSON.parse(textOf(await hub.server('everything')!.call('get-env', {}))) as Record<
      string,
      string
    >;
    expect(env.PASSED_ON).toBe('declared-value');
    const all = JSON.stringify(env);
    for (const secret of ['store-secret-pw', 'redis-secret-pw', 'sk-model-key-secret', 'undeclared-value'])
      expect(all).not.toContain(secret);
  });
});

describe('a call past its timeout', () => {
  it('is cancelled (notifications/cancelled reaches the server) and the server stays usable', async () => {
    const log = join(ws, 'cancelled.log');
    const hub = await hubOf([{ name: 'tiny', command: ['node', TINY, 'normal', log], timeoutSeconds: 1 }]);
    const s = hub.server('tiny')!;
    await eventually('connected', () => s.ready, { timeoutMs: 60_000 });
    const r = await s.call('slow', {});
    expect(r).toMatchObject({ ok: false, errorClass: 'transient' });
    await eventually(
      'the cancellation at the server',
      () => existsSync(log) && readFileSync(log, 'utf8').includes('cancelled'),
    );
    expect(textOf(await s.call('touch', { path: 'a' }))).toBe('{"path":"a"}');
  });

  it('of server-everything: the long-running operation is given up at the timeout', async () => {
    const hub = await hubOf([{ name: 'slow', command: [EVERYTHING], timeoutSeconds: 2 }]);
    // A short timeout bounds connecting too: on a loaded machine a later attempt may be the one.
    await eventually('connected', () => hub.server('slow')!.ready, { timeoutMs: 60_000 });
    const r = await hub.server('slow')!.call('trigger-long-running-operation', { duration: 30, steps: 30 });
    expect(r).toMatchObject({ ok: false, errorClass: 'transient' });
    expect(textOf(await hub.server('slow')!.call('echo', { message: 'still here' }))).toBe(
      'Echo: still here',
    );
  });
});

describe('servers that fail', () => {
  it("a hung server and a bad schema: the others' tools are there, the hung one is absent with its reason", async () => {
    const registry = new Registry();
    const hub = await hubOf(
      [
        { name: 'hung', command: ['node', TINY, 'hang'], timeoutSeconds: 1 },
        { name: 'tiny', command: ['node', TINY], timeoutSeconds: 10 },
        { name: 'missing', command: ['/nonexistent/mcp-server'], timeoutSeconds: 10 },
      ],
      undefined,
      {},
      registry,
    );
    expect(hub.tool('tiny__touch')).toBeDefined();
    expect(hub.tools().some((t) => t.server === 'hung' || t.server === 'missing')).toBe(false);
    const problems = Object.fromEntries(hub.problems().map((p) => [p.server, p.reason]));
    expect(problems.hung).toMatch(/^transient: no session within 1000 ms/);
    expect(problems.missing).toMatch(/^config: cannot start/);
    expect(hub.tool('tiny__bad')).toBeUndefined();
    // Surfaced as metrics too: which servers are up, how calls end.
    expect(textOf(await hub.server('tiny')!.call('touch', { path: 'm' }))).toBe('{"path":"m"}');
    await hub.server('hung')!.call('slow', {});
    const text = await registry.metrics();
    expect(text).toMatch(/^holt_mcp_server_up\{server="hung"\} 0$/m);
    expect(text).toMatch(/^holt_mcp_server_up\{server="tiny"\} 1$/m);
    expect(text).toMatch(/^holt_mcp_calls_total\{server="tiny",outcome="ok"\} 1$/m);
    expect(text).toMatch(/^holt_mcp_calls_total\{server="hung",outcome="transient"\} 1$/m);
    expect(await promlint(text)).toEqual([]);
    expect(hub.server('tiny')!.refused).toEqual([
      { name: 'bad', reason: 'its input schema is of type "string", not object' },
    ]);
  });

  it('a server that floods its stdout: the session is given up at 8 MiB, then started again', async () => {
    const hub = await hubOf([{ name: 'tiny', command: ['node', TINY], timeoutSeconds: 10 }]);
    const s = hub.server('tiny')!;
    // Closed at the cap (not left to time out with 9 MiB held).
    expect(await s.call('flood', {})).toMatchObject({
      ok: false,
      errorClass: 'transient',
      error: expect.stringMatching(/Connection closed/),
    });
    await eventually('the server back', () => s.ready, { timeoutMs: 20_000 });
    expect(textOf(await s.call('touch', { path: 'c' }))).toBe('{"path":"c"}');
  });

  it('a call made inside a span hands the server its trace in params._meta; outside one, no _meta', async () => {
    const hub = await hubOf([{ name: 'tiny', command: ['node', TINY], timeoutSeconds: 10 }]);
    const s = hub.server('tiny')!;
    expect(textOf(await s.call('meta', {}))).toBe('null');
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const span = trace.wrapSpanContext({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: 1,
    });
    const inside = await context.with(trace.setSpan(ROOT_CONTEXT, span), () => s.call('meta', {}));
    expect(JSON.parse(textOf(inside))).toEqual({ traceparent });
  });

  it('a server that dies mid-call: a transient error, then a new session after a backoff', async () => {
    const hub = await hubOf([{ name: 'tiny', command: ['node', TINY], timeoutSeconds: 10 }]);
    const s = hub.server('tiny')!;
    const r = await s.call('boom', {});
    expect(r).toMatchObject({ ok: false, errorClass: 'transient' });
    expect(hub.tool('tiny__touch')).toBeUndefined();
    await eventually('the server back', () => s.ready, { timeoutMs: 20_000 });
    expect(textOf(await s.call('touch', { path: 'b' }))).toBe('{"path":"b"}');
  });
});

describe('server-filesystem, scoped to the workspace', () => {
  it('reads inside the workspace and is refused outside it', async () => {
    const hub = await hubOf([{ name: 'fs', command: [FILESYSTEM, '.'], timeoutSeconds: 10 }]);
    const s = hub.server('fs')!;
    expect(textOf(await s.call('read_text_file', { path: join(ws, 'notes.txt') }))).toBe(
      'inside the workspace',
    );
    const out = await s.call('read_text_file', { path: '/etc/hostname' });
    expect(out.ok && resultText(out.result, 8000)).toMatchObject({
      isError: true,
      text: expect.stringMatching(/denied/i),
    });
  });
});

describe('over the runner socket (the agent container)', () => {
  let server: Server;
  let dir: string;
  beforeAll(async () => {
    dir = makeTempDir('mcp-sock-');
    server = await startRunnerServer({ socket: join(dir, 'runner.sock'), env: pupEnv, log: silentLogger() });
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    removeDir(dir);
  });

  it('runs the stdio server there, with no store credential in its environment', async () => {
    const runner = new SocketToolRunner(join(dir, 'runner.sock'));
    const hub = await hubOf(
      [
        { name: 'everything', command: [EVERYTHING], timeoutSeconds: 10 },
        { name: 'tiny', command: ['node', TINY], env: ['REDIS_URL', 'PASSED_ON'], timeoutSeconds: 10 },
      ],
      runner,
    );
    expect(textOf(await hub.server('everything')!.call('echo', { message: 'via socket' }))).toBe(
      'Echo: via socket',
    );
    const env = textOf(await hub.server('tiny')!.call('env', {}));
    await hub.close(); // the runner server closes only once its connections are gone
    expect(env).toContain('declared-value');
    for (const secret of ['store-secret-pw', 'redis-secret-pw', 'sk-model-key-secret'])
      expect(env).not.toContain(secret);
  });

  it('refuses a server that cannot start with a clear reason', async () => {
    const hub = await hubOf(
      [{ name: 'nope', command: ['/nonexistent/x'], timeoutSeconds: 5 }],
      new SocketToolRunner(join(dir, 'runner.sock')),
    );
    expect(hub.problems()[0]?.reason).toMatch(/^config: .*cannot start \/nonexistent\/x/);
    await hub.close();
  });
});

describe('server-everything over HTTP', () => {
  it('Streamable HTTP: calls, and a new session when the server forgot ours', async () => {
    const port = await freePort();
    let child = await httpEverything('streamableHttp', port);
    try {
      const hub = await hubOf([{ name: 'remote', url: `http://127.0.0.1:${port}/mcp`, timeoutSeconds: 10 }]);
      const s = hub.server('remote')!;
      expect(textOf(await s.call('echo', { message: 'over http' }))).toBe('Echo: over http');
      // A restarted server knows no session: the call opens a new one and goes through.
      await stop(child);
      child = await httpEverything('streamableHttp', port);
      expect(textOf(await s.call('echo', { message: 'again' }))).toBe('Echo: again');
    } finally {
      await stop(child);
    }
  });

  it('falls back to SSE for a server that speaks only the older transport', async () => {
    const port = await freePort();
    const child = await httpEverything('sse', port);
    try {
      const hub = await hubOf([{ name: 'old', url: `http://127.0.0.1:${port}/sse`, timeoutSeconds: 10 }]);
      expect(hub.problems()).toEqual([]);
      expect(textOf(await hub.server('old')!.call('echo', { message: 'sse' }))).toBe('Echo: sse');
    } finally {
      await stop(child);
    }
  });
});

describe("a remote server's headers", () => {
  it("are sent from the pup's environment; a refused one is auth, a missing variable config", async () => {
    const port = await freePort();
    const child = await listening(
      [AUTH_SERVER],
      { PORT: String(port), AUTH_TOKEN: 'right-token-123' },
      'auth server',
    );
    try {
      const server = (name: string) => ({
        name,
        url: `http://127.0.0.1:${port}/mcp`,
        headers: { Authorization: { env: 'MCP_TOKEN', prefix: 'Bearer ' } },
        timeoutSeconds: 10,
      });
      const ok = await hubOf([server('good')], undefined, { MCP_TOKEN: 'right-token-123' });
      expect(textOf(await ok.server('good')!.call('whoami', {}))).toBe('admitted');
      const bad = await hubOf([server('bad')], undefined, { MCP_TOKEN: 'wrong-token-456' });
      expect(bad.problems()[0]?.reason).toMatch(/^auth: /);
      const none = await hubOf([server('none')], undefined, {});
      expect(none.problems()[0]?.reason).toBe(
        'config: header Authorization: the variable MCP_TOKEN is not set',
      );
    } finally {
      await stop(child);
    }
  });
});

describe('a server that forgot the session', () => {
  it('answers 404 (as the specification says): the call opens a new session and goes through', async () => {
    const port = await freePort();
    const env = { PORT: String(port), AUTH_TOKEN: 'tok-404-test', STATEFUL: '1' };
    let child = await listening([AUTH_SERVER], env, 'stateful server');
    try {
      const hub = await hubOf(
        [
          {
            name: 'stateful',
            url: `http://127.0.0.1:${port}/mcp`,
            headers: { Authorization: { env: 'T', prefix: 'Bearer ' } },
            timeoutSeconds: 10,
          },
        ],
        undefined,
        { T: 'tok-404-test' },
      );
      const s = hub.server('stateful')!;
      expect(textOf(await s.call('whoami', {}))).toBe('admitted');
      await stop(child);
      child = await listening([AUTH_SERVER], env, 'stateful server, restarted');
      expect(textOf(await s.call('whoami', {}))).toBe('admitted');
    } finally {
      await stop(child);
    }
  });
});
