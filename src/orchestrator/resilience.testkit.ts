import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { Blackboard } from '../blackboard/client.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import type { OrchestratorConfig } from './config.ts';
import type { Orchestrator, OrchestratorOptions } from './orchestrator.ts';
import {
  type AgentScript,
  recordChannels,
  redisPerFile,
  register,
  ScriptedAgent,
  startOrchestrator,
} from './testkit.ts';

/** What the orchestrator's resilience tests share: one Redis per file, instances of scripted agents. */

export const isGoal = (a: Artefact) => a.type === 'GoalDefined';
export const onGoal = (bid: string) => (a: Artefact) => (isGoal(a) ? bid : 'ignore');

/** Review → parallel → exclusive on the goal; every output is Terminal-free Standard except the last. */
export const threePhase: AgentScript[] = [
  { role: 'Reviewer', bid: onGoal('review'), respond: () => ({ type: 'Review', payload: '{}' }) },
  { role: 'Par', bid: onGoal('claim'), respond: () => ({ type: 'Part', payload: 'p' }) },
  { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code', payload: 'c' }) },
];

/** Each (claim, role) got at most one claim_granted, and no claim's recorded grant ever changed. */
export function assertNoDuplicateGrant(rec: Awaited<ReturnType<typeof recordChannels>>): void {
  const seen = new Map<string, number>();
  for (const d of rec.events('claim_granted')) {
    const k = `${d.claim_id}/${d.agent_name}`;
    seen.set(k, (seen.get(k) ?? 0) + 1);
  }
  expect([...seen.values()].filter((n) => n > 1)).toEqual([]);
  const exclusive = new Map<string, string>();
  for (const m of rec.messages.filter((x) => x.channel === 'claim_updates')) {
    const c = m.msg as Claim;
    if (!c.granted_exclusive_agent) continue;
    expect(exclusive.get(c.id) ?? c.granted_exclusive_agent).toBe(c.granted_exclusive_agent);
    exclusive.set(c.id, c.granted_exclusive_agent);
  }
}

/** A Redis for the calling test file (started before its tests) and `setup`, whose parts stop after each test. */
export function resilienceKit() {
  const { url, cleanups } = redisPerFile();
  const redis = {
    get url(): string {
      return url();
    },
  };
  async function setup(scripts: AgentScript[], extraRoles: string[] = []) {
    const instance = `r${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    await register(bb, [...scripts.map((s) => s.role), ...extraRoles]);
    const rec = await recordChannels(redis.url, instance);
    const agents: ScriptedAgent[] = [];
    for (const s of scripts) agents.push(await ScriptedAgent.start(redis.url, instance, s));
    const orchs: Orchestrator[] = [];
    cleanups.push(async () => {
      for (const o of orchs) await o.stop().catch(() => undefined);
      for (const a of agents) await a.stop();
      rec.close();
      await bb.close();
    });
    const start = (
      over: Partial<OrchestratorConfig> = {},
      opts: Omit<OrchestratorOptions, 'config'> = {},
    ) => {
      const o = startOrchestrator(redis.url, instance, over, opts);
      orchs.push(o);
      return o;
    };
    return { instance, bb, rec, agents, start };
  }
  return { redis, setup, cleanups };
}
