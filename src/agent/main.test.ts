import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { executionLeaseKey } from '../blackboard/execution-lease.ts';
import { outputId } from '../blackboard/grants.ts';
import { grantedClaim, node, pupEnv, sh } from '../pup/testkit.ts';

/** The pup as a real process: `node src/agent/main.ts`, signals and exit codes. */

let redis: RedisServer;
let bb: Blackboard;
let ws: string;
beforeAll(async () => {
  redis = await startRedis();
  bb = Blackboard.connect(redis.url, 'proc');
  ws = makeTempDir('ws');
});
afterAll(async () => {
  await bb?.close();
  await redis?.stop();
  removeDir(ws);
});

/** `entry`: the script and its first arguments, from this folder (default the pup's own main). */
function runPup(
  env: Record<string, string>,
  args: string[] = [],
  nodeArgs: string[] = [],
  entry: string[] = ['main.ts'],
) {
  const [script, ...first] = entry;
  const child: ChildProcess = spawn(
    process.execPath,
    [...nodeArgs, join(import.meta.dirname, script as string), ...first, ...args],
    {
      env: {
        ...process.env,
        ...pupEnv({ REDIS_URL: redis.url, HOLT_INSTANCE_NAME: 'proc', HOLT_WORKSPACE: ws, ...env }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (b) => {
    stdout += b;
  });
  child.stderr?.on('data', (b) => {
    stderr += b;
  });
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('exit', (code) => resolve({ code, stdout, stderr })),
  );
  return { child, exited, log: () => stdout };
}

const grantExclusive = { status: 'pending_exclusive', granted_exclusive_agent: 'coder' } as const;

describe('pup process', () => {
  it('a bad variable exits 78 (EX_CONFIG) with one line naming it', async () => {
    const { exited } = runPup({ HOLT_TOOL_OUTPUT_LIMIT_BYTES: 'lots' });
    const r = await exited;
    expect(r.code).toBe(78);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^holt pup: invalid configuration: HOLT_TOOL_OUTPUT_LIMIT_BYTES: /);
  });

  it('a command pup, as `holt pup` runs it, loads no model client, Postgres, NATS, Kubernetes client, renderer or YAML parser', async () => {
    const hook = join(import.meta.dirname, '../../test/fixtures/hooks/packages.mjs');
    // Through the CLI, as holt up and the runtime image start every pup.
    const { child, exited, log } = runPup({}, [], ['--import', hook], ['../cli/main.ts', 'pup']);
    await eventually('the pup to start', async () => log().includes('"pup_started"'));
    child.kill('SIGTERM');
    const r = await exited;
    expect(r.code).toBe(0);
    const loaded = (/^PACKAGES (.*)$/m.exec(r.stderr)?.[1] ?? '').split(' ');
    expect(loaded).toContain('ioredis');
    for (const heavy of [
      'openai',
      'pg',
      '@nats-io/transport-node',
      'node-pg-migrate',
      '@kubernetes/client-node',
      '@viz-js/viz',
      'yaml',
    ])
      expect(loaded).not.toContain(heavy);
  });

  it('SIGTERM during a tool: stops bidding, lets the tool finish, writes its result, exits 0', async () => {
    const { claim } = await grantedClaim(bb, grantExclusive);
    const p = runPup({ HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '2')) });
    const out = outputId('proc', claim.id, 'coder', 'exclusive');
    await eventually(
      'the tool to start',
      async () => (await bb.redis.exists(executionLeaseKey(bb, out))) > 0,
    );
    p.child.kill('SIGTERM');
    const late = await grantedClaim(bb, {});
    const r = await p.exited;
    expect(r.code).toBe(0);
    expect((await bb.getArtefact(out))?.type).toBe('SlowResult');
    expect(await bb.getBids(late.claim.id)).toEqual({});
    const events = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).event_type);
    expect(events).toEqual(
      expect.arrayContaining(['signal_received', 'pup_stopping', 'artefact_created', 'pup_stopped']),
    );
    expect(events.indexOf('pup_stopping')).toBeLessThan(events.indexOf('artefact_created'));
  });

  it('past the grace period the tool is killed, the grant stays open, and a worker (--execute-claim) runs it', async () => {
    const { claim } = await grantedClaim(bb, grantExclusive);
    const p = runPup({
      HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '30')),
      HOLT_SHUTDOWN_GRACE_MS: '200',
    });
    const out = outputId('proc', claim.id, 'coder', 'exclusive');
    await eventually(
      'the tool to start',
      async () => (await bb.redis.exists(executionLeaseKey(bb, out))) > 0,
    );
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
    expect(await bb.getArtefact(out)).toBeNull();
    expect(await bb.redis.exists(executionLeaseKey(bb, out))).toBe(0);

    const w = runPup({ HOLT_BIDDING_STRATEGY: '', HOLT_AGENT_COMMAND: JSON.stringify(node('echo.mjs')) }, [
      '--execute-claim',
      claim.id,
    ]);
    const r = await w.exited;
    expect(r.code).toBe(0);
    expect((await bb.getArtefact(out))?.type).toBe('EchoResult');
    // a worker for a claim that is not granted to its role exits 1
    const other = await grantedClaim(bb, { ...grantExclusive, granted_exclusive_agent: 'someone-else' });
    expect((await runPup({}, ['--execute-claim', other.claim.id]).exited).code).toBe(1);
  });
});
