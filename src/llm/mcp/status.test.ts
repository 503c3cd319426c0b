import { execFile, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../../test/harness/tmp.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { newPasswords } from '../../access/principals.ts';
import { redisAclLines, redisUrl } from '../../access/redis.ts';
import { Blackboard } from '../../blackboard/client.ts';
import { type McpStatusReport, mcpStatusKey, readMcpStatus } from '../../blackboard/mcp-status.ts';
import { setAgents } from '../../blackboard/registry.ts';
import { silentLogger } from '../../common/logger.ts';
import { config } from '../../pup/testkit.ts';
import { type LlmPlugin, startLlmPlugin } from '../plugin.ts';
import { TINY } from './mcp.testkit.ts';
import { describeFailure } from './status.ts';

// The pup publishes its MCP servers' states to the Holt's Redis (mcp_status:{role}), as the pup's own
// Redis user, on a change only: the operator's Agent status and `holt status` read them.

const I = 'mcpstatus';
const ROLE = 'coder';

describe('pure: why a server is down, in fixed words', () => {
  it('classes each cause and never carries what the server said', () => {
    const e = (message: string, more: Record<string, unknown> = {}) =>
      Object.assign(new Error(message), more);
    expect(describeFailure(e('cannot start /nope: spawn /nope ENOENT'), 30)).toEqual({
      state: 'refused',
      reason: 'its command cannot be started (ENOENT)',
    });
    expect(describeFailure(e('Unauthorized: token sk-secret-123 is bad', { code: 401 }), 30)).toEqual({
      state: 'refused',
      reason: 'the server refused our credentials (HTTP 401/403)',
    });
    expect(describeFailure(e('no session within 2000 ms', { code: -32001 }), 2)).toEqual({
      state: 'unreachable',
      reason: 'no session within 2 s (it hangs or is slow)',
    });
    expect(describeFailure(e('fetch failed', { cause: { code: 'ECONNREFUSED' } }), 2).reason).toBe(
      'cannot connect (ECONNREFUSED)',
    );
    // The same cause twice is the same text (the status does not churn); a server's words stay out.
    const odd = describeFailure(e('weird reply: my-secret-header-value at 12:00:01'), 2);
    expect(odd).toEqual(describeFailure(e('weird reply: other text at 12:00:02'), 2));
    expect(odd.reason).not.toContain('secret');
  });
});

let redis: RedisServer;
let postgres: PostgresServer;
let admin: Blackboard;
let pupUrl = '';
let ws = '';
const plugins: LlmPlugin[] = [];
const boards: Blackboard[] = [];

beforeAll(async () => {
  const pw = newPasswords();
  [redis, postgres] = await Promise.all([
    startRedis({ acl: redisAclLines(I, pw), adminPassword: pw.admin }),
    startPostgres(),
  ]);
  pupUrl = redisUrl('pup', pw.pup, '127.0.0.1', redis.port);
  admin = Blackboard.connect(redis.url, I);
  ws = makeTempDir('mcp-status-');
});

afterAll(async () => {
  for (const p of plugins) await p.close().catch(() => undefined);
  for (const b of boards) await b.close().catch(() => undefined);
  await admin?.close();
  await Promise.all([redis?.stop(), postgres?.stop()]);
  removeDir(ws);
});

/** An LLM pup's plugin with these MCP servers, on the Holt's Redis as the pup's user. */
async function pup(servers: Record<string, unknown>[]): Promise<LlmPlugin> {
  const cfg = config({
    REDIS_URL: pupUrl,
    HOLT_INSTANCE_NAME: I,
    HOLT_AGENT_NAME: ROLE,
    HOLT_WORKSPACE: ws,
    HOLT_AGENT_COMMAND: '',
    HOLT_LLM_ENABLED: 'true',
    HOLT_LLM_BASE_URL: 'http://127.0.0.1:1/v1', // never called here
    HOLT_LLM_MODEL: 'scripted',
    DATABASE_URL: postgres.url,
    HOLT_LLM_MCP_SERVERS: JSON.stringify(servers),
  });
  const bb = Blackboard.connect(pupUrl, I);
  boards.push(bb);
  const rt = await startLlmPlugin({ ...cfg, llm: cfg.llm! }, bb, silentLogger(), {
    PATH: process.env.PATH,
    HOLT_LLM_API_KEY: 'sk-unit-test-key-000',
  });
  plugins.push(rt);
  return rt;
}

const HOLT = join(import.meta.dirname, '..', '..', '..', 'bin', 'holt');

/** `holt status` of this instance as `holt up` records it (its supervisor: a live process that says __supervise). */
async function localHoltStatus(): Promise<string> {
  await setAgents(admin, [{ role: ROLE, kind: 'standard' }]);
  const home = makeTempDir('mcp-status-home');
  const supervisor = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)', '__supervise'], {
    stdio: 'ignore',
  });
  try {
    mkdirSync(join(home, 'instances', I), { recursive: true });
    const state = {
      name: I,
      workspace: ws,
      holtFile: join(ws, 'holt.yml'),
      supervisorPid: supervisor.pid,
      startedAt: Date.now(),
      status: 'running',
      redisUrl: redis.url,
    };
    writeFileSync(join(home, 'instances', I, 'state.json'), JSON.stringify(state));
    const r = await promisify(execFile)(HOLT, ['status', '--name', I], {
      env: { ...process.env, HOLT_HOME: home, NO_COLOR: '1' },
    });
    return r.stdout;
  } finally {
    supervisor.kill('SIGKILL');
    removeDir(home);
  }
}

const report = () => readMcpStatus(admin.redis, I, ROLE);
const server = (r: McpStatusReport | null, name: string) => r?.servers.find((s) => s.name === name);

describe('an LLM pup publishes its MCP servers (real Redis, the pup user, real stdio servers)', () => {
  it('one working server and one that cannot start: both states, the tools of the one, why not the other', async () => {
    const rt = await pup([
      { name: 'tiny', command: ['node', TINY], tools: ['touch', 'boom'] },
      { name: 'broken', command: ['/nonexistent/mcp-server'] },
    ]);
    const r = await eventually('the first report', async () => {
      const x = await report();
      return server(x, 'tiny') && server(x, 'broken') ? x : undefined;
    });
    expect(server(r, 'tiny')).toMatchObject({ state: 'connected', tools: ['touch', 'boom'] });
    expect(server(r, 'tiny')?.reason).toBeUndefined();
    expect(server(r, 'broken')).toMatchObject({
      state: 'refused',
      tools: [],
      reason: 'its command cannot be started (ENOENT)',
    });
    await rt.mcpStatus!.idle();
    expect(rt.mcpStatus!.writes).toBe(1); // the first connections, published once
    // `holt status` of the local instance names the server that is down, with why.
    const text = await localHoltStatus();
    expect(text).toContain('MCP servers not connected: 1 of 2');
    expect(text).toMatch(/coder\s+broken\s+refused\s+\S.* ago\s+its command cannot be started \(ENOENT\)/);
    expect(text).not.toMatch(/coder\s+tiny/);
    await rt.close();
  });

  it('a server that dies is unreachable, and connected again when it comes back; calls write nothing', async () => {
    await admin.redis.del(mcpStatusKey(I, ROLE));
    const rt = await pup([{ name: 'tiny', command: ['node', TINY] }]);
    const up = await eventually('connected', async () => {
      const s = server(await report(), 'tiny');
      return s?.state === 'connected' ? s : undefined;
    });
    const tiny = rt.mcp!.server('tiny')!;
    for (let i = 0; i < 3; i++) expect((await tiny.call('touch', { path: `f${i}` })).ok).toBe(true);
    await rt.mcpStatus!.idle();
    expect(rt.mcpStatus!.writes).toBe(1);
    expect((await report())?.updated_at_ms).toBeLessThanOrEqual(Date.now());
    // The server exits mid-call: its session closes, it is retried (1 s backoff) and comes back.
    await tiny.call('boom', {});
    const down = await eventually('unreachable', async () => {
      const s = server(await report(), 'tiny');
      return s?.state === 'unreachable' ? s : undefined;
    });
    expect(down).toMatchObject({
      tools: [],
      reason: 'the session closed (the server ended or the connection was lost)',
    });
    expect(down.since_ms).toBeGreaterThanOrEqual(up.since_ms);
    const again = await eventually('connected again', async () => {
      const s = server(await report(), 'tiny');
      return s?.state === 'connected' ? s : undefined;
    });
    expect(again.tools).toContain('touch');
    expect(again.since_ms).toBeGreaterThanOrEqual(down.since_ms);
  });
});
