import type { ChildProcess } from 'node:child_process';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, expect } from 'vitest';
import { type LlmServer, type ScriptedReply, startLlmServer } from '../../test/harness/llm.ts';
import { llmPupEnv, startPupRuntime, useRuntimeStores } from '../../test/harness/llm-runtime.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import type { Artefact } from '../blackboard/types.ts';
import { grantedClaim, spawnPup } from '../pup/testkit.ts';
import type { LlmPlugin } from './plugin.ts';

/** What the LLM plugin's tests share: a pup runtime on real stores and a scripted model, and grants run on it. */

const node = process.execPath;
/** A tool that counts its runs in a file and prints something new each time. */
export const counter = (file: string) => ({
  name: 'count',
  description: 'count',
  parameters: { type: 'object', properties: { tag: { type: 'string' } } },
  argv: [
    node,
    '-e',
    `const f=require('fs');f.appendFileSync(${JSON.stringify(file)},'x');console.log('run',f.readFileSync(${JSON.stringify(file)},'utf8').length)`,
  ],
});
export const constant = { name: 'read', description: 'reads', argv: [node, '-e', 'console.log("same")'] };

export interface Setup {
  instance: string;
  bb: Blackboard;
  rt: LlmPlugin;
  registry: Registry;
}

/** Stores for one test file (started before its tests, stopped after) and the helpers bound to them. */
export function llmKit(wsName: string) {
  const stores = useRuntimeStores(wsName, 2);
  let n = 0;
  async function setup(script: ScriptedReply[], env: Record<string, string> = {}): Promise<Setup> {
    const instance = `stores.llm${++n}`;
    stores.llm.reset(script);
    const registry = new Registry();
    const { bb, rt } = await startPupRuntime(
      stores,
      llmPupEnv(stores, instance, { HOLT_BUDGET_ERROR_BASE_MS: '5', ...env }),
      registry,
    );
    return { instance, bb, rt, registry };
  }
  async function grantAndRun(s: Setup, target?: Artefact) {
    const { claim } = await grantedClaim(
      s.bb,
      { status: 'pending_exclusive', granted_exclusive_agent: 'coder' },
      target,
    );
    const grant = { claimId: claim.id, claimType: 'exclusive' as const };
    const outcome = await s.rt.executor!.execute(grant);
    const out = await s.bb.getArtefact(outputId(s.instance, claim.id, 'coder', 'exclusive'));
    return { claim, grant, outcome, out };
  }
  /** Runs a grant until `requests` model calls have arrived, then stops it as a dying pup would (abort). */
  async function runUntilKilled(s: Setup, requests: number) {
    const { claim } = await grantedClaim(s.bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
    });
    const grant = { claimId: claim.id, claimType: 'exclusive' as const };
    const ac = new AbortController();
    const run = s.rt.executor!.execute(grant, ac.signal);
    await stores.llm.waitForRequests(requests);
    ac.abort();
    expect(await run).toBe('aborted');
    return { claim, grant };
  }
  const toolMessages = (i: number) =>
    stores.llm.requests[i]!.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');
  const lastTool = (i: number) => toolMessages(i).at(-1) ?? '';
  /** The number of the last setup (unique within the file, for names of its own). */
  const setups = () => n;
  return { stores, setup, grantAndRun, runUntilKilled, toolMessages, lastTool, setups };
}

/**
 * For tests that run the pup as a real process: Redis, Postgres, the scripted model server, a temp
 * workspace and the Blackboard of `instance`, started in the file's beforeAll; in its afterAll the
 * pups still running are SIGKILLed and all of it stopped. The getters throw if read before the
 * beforeAll has run.
 */
export function usePupProcessStores(instance: string) {
  let redis: RedisServer | undefined;
  let postgres: PostgresServer | undefined;
  let llm: LlmServer | undefined;
  let bb: Blackboard | undefined;
  let ws: string | undefined;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    [redis, postgres, llm] = await Promise.all([startRedis(), startPostgres(), startLlmServer()]);
    bb = Blackboard.connect(redis.url, instance);
    ws = makeTempDir(`llm-${instance}`);
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await bb?.close();
    await Promise.all([redis?.stop(), postgres?.stop(), llm?.close()]);
    if (ws !== undefined) removeDir(ws);
  });
  const started = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('usePupProcessStores: read before its beforeAll has run');
    return v;
  };
  /**
   * A pup process of `instance` as an LLM agent on these stores (`env` wins); its turn lease and
   * rescan are short, so that the next pup takes up a killed one's turn soon.
   */
  const spawn = (env: Record<string, string>) =>
    spawnPup(
      {
        REDIS_URL: started(redis).url,
        HOLT_INSTANCE_NAME: instance,
        HOLT_WORKSPACE: started(ws),
        HOLT_AGENT_COMMAND: '',
        HOLT_LLM_ENABLED: 'true',
        HOLT_LLM_BASE_URL: started(llm).url,
        HOLT_LLM_MODEL: 'scripted',
        HOLT_LLM_TURN_LEASE_MS: '1500',
        HOLT_RESCAN_INTERVAL_MS: '300',
        DATABASE_URL: started(postgres).url,
        ...env,
      },
      children,
    );
  return {
    bb: () => started(bb),
    llm: () => started(llm),
    postgresUrl: () => started(postgres).url,
    ws: () => started(ws),
    spawn,
  };
}
