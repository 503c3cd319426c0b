import { randomUUID } from 'node:crypto';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import type { AgentRegistration, Artefact } from '../blackboard/types.ts';
import type { Orchestrator } from './orchestrator.ts';
import {
  type AgentScript,
  recordChannels,
  redisPerFile,
  register,
  ScriptedAgent,
  startOrchestrator,
} from './testkit.ts';

/**
 * What the checklist's tests share (docs/protocol.md § The protocol table: one test per row): one Redis
 * per file, and a world per test (an instance, its scripted agents, a leading orchestrator, a recording
 * of every channel), stopped after the test.
 */

export interface World {
  instance: string;
  bb: Blackboard;
  orch: Orchestrator;
  agents: Record<string, ScriptedAgent>;
  rec: Awaited<ReturnType<typeof recordChannels>>;
}

export const isGoal = (a: Artefact) => a.type === 'GoalDefined';
export const onGoal = (bid: string) => (a: Artefact) => (isGoal(a) ? bid : 'ignore');
export const produce = (type: string) => () => ({ type, payload: 'done' });
export const approve = () => ({ type: 'Review', payload: '{}' });

/**
 * A claim's statuses as its claim_updates messages told them, once the `complete` one is in: it is
 * published in the same script as the write the test waited on, and arrives over pub/sub a moment later.
 */
export async function claimStatuses(
  rec: { messages: { channel: string; msg: unknown }[] },
  id: string,
): Promise<string[]> {
  const updates = () =>
    rec.messages
      .filter((m) => m.channel === 'claim_updates' && (m.msg as { id: string }).id === id)
      .map((m) => (m.msg as { status: string }).status);
  await eventually(`the complete update of claim ${id}`, () => updates().includes('complete'));
  return updates();
}

export function checklistKit() {
  const { url, cleanups } = redisPerFile();
  async function world(
    scripts: AgentScript[],
    over: Parameters<typeof startOrchestrator>[2] = {},
    extraRoles: (string | AgentRegistration)[] = [],
    opts: Parameters<typeof startOrchestrator>[3] = {},
  ): Promise<World> {
    const instance = `t${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(url(), instance);
    const listed = new Set(extraRoles.map((r) => (typeof r === 'string' ? r : r.role)));
    await register(bb, [...scripts.map((s) => s.role).filter((r) => !listed.has(r)), ...extraRoles]);
    const rec = await recordChannels(url(), instance);
    const agents: Record<string, ScriptedAgent> = {};
    for (const s of scripts) agents[s.role] = await ScriptedAgent.start(url(), instance, s);
    const orch = startOrchestrator(url(), instance, over, opts);
    await orch.whenLeader();
    cleanups.push(async () => {
      await orch.stop();
      for (const a of Object.values(agents)) await a.stop();
      rec.close();
      await bb.close();
    });
    return { instance, bb, orch, agents, rec };
  }
  return { world };
}
