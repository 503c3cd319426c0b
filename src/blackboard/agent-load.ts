import type { Redis } from 'ioredis';
import { z } from 'zod';
import { openGrant, outputId } from './grants.ts';
import { readJsonKey, writeJsonKey } from './json-key.ts';
import type { Claim } from './types.ts';

/**
 * How many grants each role holds and has not answered yet: the leader computes it from the claims
 * it owns and publishes it, so readers that need only this number (the operator's Agent status)
 * never read a claim or an artefact. Roles without open grants are absent.
 */
export const AgentLoad = z.object({
  updated_at_ms: z.number().int().nonnegative(),
  in_flight: z.record(z.string(), z.number().int().nonnegative()),
});
export type AgentLoad = z.infer<typeof AgentLoad>;

/** Every open grant on `claims` as (role, the output id that would answer it). */
export function openOutputs(instance: string, claims: Claim[]): { role: string; id: string }[] {
  const out: { role: string; id: string }[] = [];
  for (const c of claims) {
    const roles = new Set([
      ...c.granted_review_agents,
      ...c.granted_parallel_agents,
      ...(c.granted_exclusive_agent ? [c.granted_exclusive_agent] : []),
    ]);
    for (const role of roles) {
      const t = openGrant(c, role);
      if (t) out.push({ role, id: outputId(instance, c.id, role, t) });
    }
  }
  return out;
}

/** Open grants per role, minus those whose output already exists (`answered[i]` for `open[i]`). */
export function countInFlight(open: { role: string }[], answered: boolean[]): Record<string, number> {
  const n: Record<string, number> = {};
  open.forEach((g, i) => {
    if (!answered[i]) n[g.role] = (n[g.role] ?? 0) + 1;
  });
  return n;
}

export async function writeAgentLoad(redis: Redis, key: string, load: AgentLoad): Promise<void> {
  await writeJsonKey(redis, key, load);
}

/** The published load, or null before any leader published one. Throws BlackboardDataError if malformed. */
export function readAgentLoad(redis: Redis, key: string): Promise<AgentLoad | null> {
  return readJsonKey(redis, key, AgentLoad, 'agent load');
}
