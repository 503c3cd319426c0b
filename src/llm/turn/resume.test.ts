import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, type LlmServer, startLlmServer, submit } from '../../../test/harness/llm.ts';
import { type PostgresServer, startPostgres } from '../../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../../test/harness/tmp.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { Blackboard } from '../../blackboard/client.ts';
import { outputId } from '../../blackboard/grants.ts';
import { createPool } from '../../common/pg.ts';
import { grantedClaim, spawnPup } from '../../pup/testkit.ts';

/** The pup as a real process, killed with SIGKILL in the middle of a turn, and its secrets. */

const KEY = 'sk-test-SECRET-4f9c2e7a1b';
let redis: RedisServer;
let postgres: PostgresServer;
let llm: LlmServer;
let bb: Blackboard;
let ws: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  [redis, postgres, llm] = await Promise.all([startRedis(), startPostgres(), startLlmServer()]);
  bb = Blackboard.connect(redis.url, 'kill');
  ws = makeTempDir('llm-kill');
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await bb?.close();
  await Promise.all([redis?.stop(), postgres?.stop(), llm?.close()]);
  removeDir(ws);
});

function runPup(env: Record<string, string>) {
  return spawnPup({ REDIS_URL: redis.url, HOLT_INSTANCE_NAME: 'kill', HOLT_WORKSPACE: ws, ...env }, children);
}

describe('resume after SIGKILL', () => {
  it('a killed pup resumes the same turn from its last stored step, never repeating a finished tool call; the key leaks nowhere', async () => {
    const marker = join(ws, 'runs.txt');
    // The tool counts its runs and prints its whole environment: the key must not be in it.
    const tool = {
      name: 'work',
      description: 'does the work',
      argv: [
        process.execPath,
        '-e',
        `require('fs').appendFileSync(${JSON.stringify(marker)},'run\\n');console.log('did work', JSON.stringify(process.env))`,
      ],
    };
    const env = {
      HOLT_AGENT_COMMAND: '',
      HOLT_LLM_ENABLED: 'true',
      HOLT_LLM_BASE_URL: llm.url,
      HOLT_LLM_MODEL: 'scripted',
      HOLT_LLM_TOOLS: JSON.stringify([tool]),
      HOLT_LLM_TURN_LEASE_MS: '1500',
      HOLT_LLM_API_KEY_ENV: 'MY_LLM_KEY',
      MY_LLM_KEY: KEY,
      HOLT_RESCAN_INTERVAL_MS: '300',
      DATABASE_URL: postgres.url,
      HOLT_LOG_LEVEL: 'debug',
    };
    // Step 1 calls the tool; the model then hangs on step 2, and the pup is killed while it waits.
    llm.reset([call('work', {}), { hang: true }]);
    const first = runPup(env);
    const { claim } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
    });
    await llm.waitForRequests(2, 30_000);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(readFileSync(marker, 'utf8')).toBe('run\n');

    llm.push(submit('finished after the restart'));
    const second = runPup(env);
    const out = await eventually(
      'the result',
      () => bb.getArtefact(outputId('kill', claim.id, 'coder', 'exclusive')),
      { timeoutMs: 30_000 },
    );
    second.child.kill('SIGTERM');
    await second.exited;

    expect(out.payload).toBe('finished after the restart');
    expect(readFileSync(marker, 'utf8')).toBe('run\n'); // the tool ran once
    expect(llm.requests).toHaveLength(3); // step 1, step 2 (killed), step 2 again: step 1 not repeated
    const resumed = llm.requests[2]!.body.messages;
    expect(resumed.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(resumed[3]!.content).toContain('did work');
    expect(second.output()).toContain('"event_type":"turn_resumed"');

    // The key was used (the server saw it) and appears in no log line, artefact or stored step.
    expect(llm.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    const logs = first.output() + second.output();
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(KEY);
    expect(resumed[3]!.content).not.toContain(KEY);
    for (const a of await bb.getArtefacts(await bb.listArtefactIds()))
      expect(JSON.stringify(a)).not.toContain(KEY);
    const pool = createPool(postgres.url, { max: 1 });
    pool.on('connect', (c) => c.on('error', () => undefined));
    const dump = await pool.query(
      `SELECT (SELECT json_agg(s) FROM holt.agent_steps s)::text AS steps, (SELECT json_agg(t) FROM holt.agent_turns t)::text AS turns`,
    );
    await pool.end();
    expect(dump.rows[0].steps).toContain('did work');
    expect(dump.rows[0].steps).not.toContain(KEY);
    expect(dump.rows[0].turns).not.toContain(KEY);
    expect(existsSync(marker)).toBe(true);
  });
});
