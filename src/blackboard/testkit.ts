import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { type ClaimSnapshot, claimSnapshots, type SnapshotRequest, updateClaims } from './claim-engine.ts';
import { Blackboard, type Publication } from './client.ts';
import type { Artefact, Claim, ClaimType } from './types.ts';

/**
 * One-item forms of the blackboard's batch calls, and reads only tests make (not part of the build).
 * Tests use them to play the orchestrator's part by hand.
 */

/**
 * A Redis server and the Blackboard of `instance` on it, for the calling test file: started in its
 * beforeAll, closed in its afterAll. The getters throw if read before the beforeAll has run.
 */
export function useBlackboard(instance: string): { bb: () => Blackboard; redisUrl: () => string } {
  let redis: RedisServer | undefined;
  let bb: Blackboard | undefined;
  beforeAll(async () => {
    redis = await startRedis();
    bb = Blackboard.connect(redis.url, instance);
  });
  afterAll(async () => {
    await bb?.close();
    await redis?.stop();
  });
  const started = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('useBlackboard: read before its beforeAll has run');
    return v;
  };
  return { bb: () => started(bb), redisUrl: () => started(redis).url };
}

/** The claim made for an artefact (Holt's `claim_by_artefact` index), or null. */
export function claimIdForArtefact(bb: Blackboard, artefactId: string): Promise<string | null> {
  return bb.redis.get(bb.k.claimByArtefact(artefactId));
}

/** One claim's compare-and-set (see `Blackboard.updateClaims`): its new rev, or null on conflict. */
export async function updateClaim(
  bb: Blackboard,
  claim: Claim,
  rev: number,
  announce: Publication[] = [],
  previous?: Claim,
): Promise<number | null> {
  const [r] = await updateClaims(bb, [{ claim, rev, announce, previous }]);
  if (r instanceof Error) throw r;
  return r ?? null;
}

/** One claim's step read (see `Blackboard.claimSnapshots`). */
export async function claimSnapshot(
  bb: Blackboard,
  id: string,
  want: Omit<SnapshotRequest, 'id'>,
): Promise<ClaimSnapshot | null> {
  const [r] = await claimSnapshots(bb, [{ id, ...want }]);
  if (r instanceof Error) throw r;
  return r ?? null;
}

/** A grant announcement on the role's channel, as the orchestrator sends it. */
export function publishGrant(
  bb: Blackboard,
  role: string,
  claimId: string,
  claimType: ClaimType,
): Promise<void> {
  return bb.publish(bb.grantPublication(role, claimId, claimType));
}

let clock = 1_700_000_000_000;

/** A goal artefact with a fresh id, made after the one before (`created_at_ms`); `over` wins. */
export function artefact(over: Partial<Artefact> = {}): Artefact {
  const id = over.id ?? randomUUID();
  return {
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Standard',
    type: 'GoalDefined',
    payload: 'build it',
    source_artefacts: [],
    produced_by_role: 'user',
    created_at_ms: clock++,
    ...over,
  };
}

/** A new claim on an artefact, pending review, nothing granted; `over` wins. */
export function claim(artefactId: string, over: Partial<Claim> = {}): Claim {
  return {
    id: randomUUID(),
    artefact_id: artefactId,
    status: 'pending_review',
    granted_review_agents: [],
    granted_parallel_agents: [],
    granted_exclusive_agent: '',
    ...over,
  };
}
