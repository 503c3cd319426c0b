import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { type AgentConfig, loadAgentConfig } from '../agent/config.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { artefact, claim } from '../blackboard/testkit.ts';
import type { Claim } from '../blackboard/types.ts';

/** Shared by the pup's tests (not a test file itself). */

// The test artefacts and claims have one builder, the blackboard's (the pup's tests import them from here).
export { artefact, claim };

export const AGENTS = join(import.meta.dirname, '../../test/fixtures/agents');
export const node = (script: string, ...args: string[]) => [process.execPath, join(AGENTS, script), ...args];
export const sh = (script: string, ...args: string[]) => [join(AGENTS, script), ...args];

export function pupEnv(over: Record<string, string>): Record<string, string> {
  return {
    HOLT_INSTANCE_NAME: 'test',
    HOLT_AGENT_NAME: 'coder',
    REDIS_URL: 'redis://127.0.0.1:1',
    HOLT_AGENT_COMMAND: JSON.stringify(node('echo.mjs')),
    HOLT_BIDDING_STRATEGY: 'exclusive',
    HOLT_HEALTH_PORT: '0',
    HOLT_RESCAN_INTERVAL_MS: '200',
    ...over,
  };
}

/**
 * A pup process (`src/agent/main.ts`) with `pupEnv(over)` on top of this process's environment, its
 * stdout and stderr collected. Added to `children` so the test's teardown can kill it.
 */
export function spawnPup(over: Record<string, string>, children: ChildProcess[]) {
  const child = spawn(process.execPath, [join(import.meta.dirname, '../agent/main.ts')], {
    env: { ...process.env, ...pupEnv(over) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (b) => {
    out += b;
  });
  child.stderr?.on('data', (b) => {
    out += b;
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return { child, exited, output: () => out };
}

export function config(over: Record<string, string>, argv: string[] = []): AgentConfig {
  return loadAgentConfig(argv, pupEnv(over));
}

/** A claim's phase state: `granted` in `current`, `received` so far. */
export const phaseState = (
  current: 'review' | 'parallel' | 'exclusive',
  granted: string[],
  received: Record<string, string> = {},
) => ({ current, granted_agents: granted, received, all_bids: {}, start_time_ms: 1 });

/** A stored target plus a claim on it, granted as `over` says. */
export async function grantedClaim(bb: Blackboard, over: Partial<Claim>, target = artefact()) {
  await bb.createArtefact(target);
  const c = claim(target.id, over);
  await bb.createClaim(c);
  return { target, claim: c };
}
