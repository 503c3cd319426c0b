import { AgentLoad, countInFlight, openOutputs, writeAgentLoad } from '../blackboard/agent-load.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { BlackboardDataError } from '../blackboard/codec.ts';
import type { Claim } from '../blackboard/types.ts';

/** Active claims, skipping malformed ones (one bad hash must not hide the others' grants). */
async function activeClaims(bb: Blackboard): Promise<Claim[]> {
  const ids = await bb.activeClaimIds();
  try {
    return (await bb.getClaims(ids)).flatMap((c) => (c ? [c.claim] : []));
  } catch (e) {
    if (!(e instanceof BlackboardDataError)) throw e;
    const out: Claim[] = [];
    for (const id of ids) {
      const c = await bb.getClaim(id).catch(() => null);
      if (c) out.push(c.claim);
    }
    return out;
  }
}

/**
 * Counts each role's open grants that lack their output and publishes them (`agent_load`), unless
 * the lease went meanwhile. Returns what it published, or null when it did not.
 */
export async function publishLoad(bb: Blackboard, alive: () => boolean): Promise<AgentLoad | null> {
  const open = openOutputs(bb.instance, await activeClaims(bb));
  const answered = await bb.artefactsExist(open.map((g) => g.id));
  const load = AgentLoad.parse({ updated_at_ms: Date.now(), in_flight: countInFlight(open, answered) });
  if (!alive()) return null;
  await writeAgentLoad(bb.redis, bb.k.agentLoad, load);
  return load;
}
