import type { Blackboard } from './client.ts';
import { setAgentsScript } from './scripts.ts';
import { AgentRegistration } from './types.ts';

/** The agent registry: the roles an instance runs, with its revision and image digests (`agent_images`). */

export async function setAgents(bb: Blackboard, agents: AgentRegistration[]): Promise<number> {
  const args = agents.flatMap((a) => [a.role, JSON.stringify(AgentRegistration.parse(a))]);
  return (await setAgentsScript.run(
    bb.redis,
    [bb.k.agents, bb.k.agentsRevision, bb.k.channels.agentsChanged, bb.k.agentImages],
    args,
  )) as number;
}

/** The registry and its revision, read atomically. Malformed entries are reported, not dropped silently. */
export async function getAgents(
  bb: Blackboard,
): Promise<{ rev: number; agents: AgentRegistration[]; invalid: string[] }> {
  const res = await bb.redis.multi().hgetall(bb.k.agents).get(bb.k.agentsRevision).exec();
  const h = (res?.[0]?.[1] ?? {}) as Record<string, string>;
  const rev = Number((res?.[1]?.[1] as string | null) ?? 0);
  const agents: AgentRegistration[] = [];
  const invalid: string[] = [];
  for (const [role, json] of Object.entries(h)) {
    try {
      agents.push(AgentRegistration.parse(JSON.parse(json)));
    } catch {
      invalid.push(role);
    }
  }
  agents.sort((a, b) => (a.role < b.role ? -1 : a.role > b.role ? 1 : 0));
  return { rev, agents, invalid };
}
