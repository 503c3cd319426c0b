import { AgentLoad, countInFlight, openOutputs, writeAgentLoad } from '../blackboard/agent-load.ts';
import type { Blackboard } from '../blackboard/client.ts';

/**
 * Counts each role's open grants that lack their output and publishes them (`agent_load`), unless
 * the lease went meanwhile. Returns what it published, or null when it did not.
 */
export async function publishLoad(bb: Blackboard, alive: () => boolean): Promise<AgentLoad | null> {
  // A malformed claim reads as missing (and is quarantined by the blackboard's sink).
  const claims = (await bb.getClaims(await bb.activeClaimIds())).flatMap((c) => (c ? [c.claim] : []));
  const open = openOutputs(bb.instance, claims);
  const answered = await bb.artefactsExist(open.map((g) => g.id));
  const load = AgentLoad.parse({ updated_at_ms: Date.now(), in_flight: countInFlight(open, answered) });
  if (!alive()) return null;
  await writeAgentLoad(bb.redis, bb.k.agentLoad, load);
  return load;
}
