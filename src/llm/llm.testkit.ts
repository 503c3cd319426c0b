import { Registry } from 'prom-client';
import { expect } from 'vitest';
import type { ScriptedReply } from '../../test/harness/llm.ts';
import { llmPupEnv, startPupRuntime, useRuntimeStores } from '../../test/harness/llm-runtime.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import type { Artefact } from '../blackboard/types.ts';
import { grantedClaim } from '../pup/testkit.ts';
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
