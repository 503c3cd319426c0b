import type { Blackboard } from './client.ts';
import { contextThreadsScript } from './pup-scripts.ts';
import { artefactOf, claimOf, toHash, type VersionedClaim } from './replies.ts';
import type { Artefact } from './types.ts';

/**
 * A pup's reads, each one round trip: what it needs to bid, one level of context, which claims it has
 * bid on; and the role's pup claims (`pup:claims:{role}`, extension) its re-scan reads under any
 * orchestrator.
 */

/**
 * What a pup needs to bid, in one round trip: the stored claim, whether `role` has bid on it, and its
 * target. The target is read at `targetHint` (from the claim event), checked against the stored
 * claim, and read again only when the hint was wrong (a hint is never trusted).
 */
export async function bidView(
  bb: Blackboard,

  claimId: string,
  role: string,
  targetHint: string | undefined,
): Promise<{ claim: VersionedClaim | null; hasBid: boolean; target: Artefact | null | undefined }> {
  const p = bb.redis.pipeline().hgetall(bb.k.claim(claimId)).hexists(bb.k.bids(claimId), role);
  if (targetHint) p.hgetall(bb.k.artefact(targetHint));
  const res = (await p.exec()) ?? [];
  for (const [err] of res.slice(0, 2)) if (err) throw err;
  const ch = (res[0]?.[1] ?? {}) as Record<string, string>;
  const claim = Object.keys(ch).length ? claimOf(bb.onMalformed, claimId, ch) : null;
  const hasBid = res[1]?.[1] === 1;
  // A wrong hint, or an unreadable target: the caller reads the target itself (and reports it).
  if (!claim || claim.claim.artefact_id !== targetHint || res[2]?.[0])
    return { claim, hasBid, target: undefined };
  const th = (res[2]?.[1] ?? {}) as Record<string, string>;
  return {
    claim,
    hasBid,
    target: Object.keys(th).length ? artefactOf(bb.onMalformed, targetHint, th) : null,
  };
}

/**
 * One level of context assembly in one round trip (a pipeline): each id's artefact (HGETALL) and,
 * when its thread has a higher version, that latest version (one script call for the level). Missing
 * ids give nulls; malformed hashes are listed, not thrown.
 */
export async function contextLevel(
  bb: Blackboard,

  ids: string[],
): Promise<{ found: { artefact: Artefact | null; latest: Artefact | null }[]; malformed: string[] }> {
  if (!ids.length) return { found: [], malformed: [] };
  const args = [bb.k.prefix, ...ids];
  const p = bb.redis.pipeline();
  for (const id of ids) p.hgetall(bb.k.artefact(id));
  p.evalsha(contextThreadsScript.sha, 0, ...args);
  const res = (await p.exec()) ?? [];
  for (const [err] of res.slice(0, ids.length)) if (err) throw err;
  const [scriptErr, scriptReply] = res[ids.length] ?? [null, []];
  let newer = scriptReply as string[][];
  if (scriptErr) {
    // A fresh or restarted server: load the script (EVAL) once, for this level.
    if (!scriptErr.message.startsWith('NOSCRIPT')) throw scriptErr;
    newer = (await contextThreadsScript.run(bb.redis, [], args)) as string[][];
  }
  const malformed: string[] = [];
  const decode = (id: string, h: Record<string, string>): Artefact | null => {
    if (!Object.keys(h).length) return null;
    const a = artefactOf(bb.onMalformed, h.id ?? id, h);
    if (!a) malformed.push(h.id ?? id);
    return a;
  };
  const found = ids.map((id, i) => ({
    artefact: decode(id, (res[i]?.[1] ?? {}) as Record<string, string>),
    latest: decode(id, toHash(newer[i])),
  }));
  return { found, malformed };
}

/** For each claim, whether `role` has bid on it (one pipelined round trip). */
export async function hasBids(bb: Blackboard, claimIds: string[], role: string): Promise<boolean[]> {
  return bb.pipelined(
    claimIds,
    (p, id) => p.hexists(bb.k.bids(id), role),
    (v) => v === 1,
  );
}

/** Records claims in the role's pup claims (a feedback claim is assigned without a bid). */
export async function watchClaims(bb: Blackboard, role: string, claimIds: string[]): Promise<void> {
  if (!claimIds.length) return;
  const now = Date.now();
  await bb.redis.zadd(bb.k.pupClaims(role), 'NX', ...claimIds.flatMap((id) => [now, id]));
}

/**
 * The claims a pup's re-scan reads, in one round trip: the active index (this project's orchestrator)
 * and the role's pup claims (any orchestrator), and with `withDormant` the dormant index.
 */
export async function claimsToScan(
  bb: Blackboard,
  role: string,
  withDormant = false,
): Promise<{ active: string[]; watched: string[]; dormant: string[] }> {
  const m = bb.redis.multi().smembers(bb.k.activeClaims).zrange(bb.k.pupClaims(role), 0, -1);
  // A starting pup also reads the dormant claims: those closed while it was silent take its bid late.
  if (withDormant) m.smembers(bb.k.dormantClaims);
  const res = (await m.exec()) as [Error | null, string[]][] | null;
  for (const [err] of res ?? []) if (err) throw err;
  return { active: res?.[0]?.[1] ?? [], watched: res?.[1]?.[1] ?? [], dormant: res?.[2]?.[1] ?? [] };
}

/** Drops settled claims from the role's pup claims, those first seen before `olderThanMs`, and all but the newest `keep`. */
export async function unwatchClaims(
  bb: Blackboard,
  role: string,
  claimIds: string[],
  olderThanMs: number,
  keep: number,
): Promise<void> {
  const key = bb.k.pupClaims(role);
  const m = bb.redis.multi();
  if (claimIds.length) m.zrem(key, ...claimIds);
  await m
    .zremrangebyscore(key, '-inf', `(${olderThanMs}`)
    .zremrangebyrank(key, 0, -(keep + 1))
    .exec();
}
