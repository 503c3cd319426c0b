import type { Blackboard, Publication } from './client.ts';
import { BlackboardDataError, claimToHash, claimToJson } from './codec.ts';
import {
  artefactOf,
  childrenFrom,
  claimOf,
  flat,
  lenient,
  type MalformedSink,
  toHash,
  type VersionedClaim,
} from './replies.ts';
import { artefactArrivedScript, claimSnapshotScript, updateClaimsScript } from './scripts.ts';
import type { Artefact, Claim } from './types.ts';

/**
 * The orchestrator's reads and writes of the blackboard: an arriving artefact indexed and claimed in one
 * script, a step's read-ahead snapshot, compare-and-set claim updates, and the indexes its recovery and
 * reconcile passes walk. The shapes here are the orchestrator's (a step reads a ClaimSnapshot, writes
 * a ClaimUpdate).
 */

const FINAL = new Set(['complete', 'terminated']);

/** What one orchestrator step reads (see `claimSnapshots`). */
export interface ClaimSnapshot {
  vc: VersionedClaim;
  /** The raw bids hash, when asked for (else empty). */
  bids: Record<string, string>;
  /** The target artefact, when asked for and present. */
  target: Artefact | null;
  /** The target's children (the outputs index) that exist, by id. */
  children: Map<string, Artefact>;
}

/** One compare-and-set of updateClaims. */
export interface ClaimUpdate {
  claim: Claim;
  rev: number;
  announce?: Publication[];
  previous?: Claim | undefined;
}

/** What a step asks of claimSnapshots. */
export interface SnapshotRequest {
  id: string;
  bids: boolean;
  target: boolean;
  known?: VersionedClaim | undefined;
}

/**
 * What artefactArrived read of one source's claim, as that claim's next step would have: its rev and
 * the source's children, the arriving artefact among them.
 */
export interface SourceRead {
  rev: number;
  children: Map<string, Artefact>;
}

/** A source's part of artefactArrived's reply; null when it cannot be used (a malformed child, say). */
function sourceRead(arrived: Artefact, raw: unknown): SourceRead | null {
  const r = (raw ?? []) as unknown[];
  if (!r.length || r[0] === '') return null;
  let bad = false;
  // The step reads for itself when a child is malformed, and reports it then (once, not here too).
  const children = childrenFrom(
    () => {
      bad = true;
    },
    r,
    1,
  );
  if (bad) return null;
  children.set(arrived.id, arrived);
  return { rev: Number(r[0]), children };
}

/** A step's read; null when the claim is gone or malformed (reported). */
function parseSnapshot(sink: MalformedSink, r: SnapshotRequest, res: unknown[]): ClaimSnapshot | null {
  if (!res.length) return null;
  const { id, known } = r;
  const h = toHash(res[0]);
  const unchanged = known !== undefined && h.id === undefined && h.rev === String(known.rev);
  const vc = unchanged ? known : claimOf(sink, id, h);
  if (!vc) return null;
  const th = toHash(res[2]);
  const target = Object.keys(th).length ? artefactOf(sink, vc.claim.artefact_id, th) : null;
  return { vc, bids: toHash(res[1]), target, children: childrenFrom(sink, res, 3) };
}

/** Field/value pairs of `next` that differ from `prev`; a field `next` no longer has becomes ''. */
function changedFields(prev: Record<string, string>, next: Record<string, string>): string[] {
  const out: string[] = [];
  for (const k in next) if (next[k] !== prev[k]) out.push(k, next[k] as string);
  for (const k in prev) if (!(k in next)) out.push(k, '');
  return out;
}

/**
 * An artefact the orchestrator heard of, in one round trip: indexes it (idempotent), creates `claim`
 * for it unless it has one (null: it takes none), and returns the claims of its sources, each with
 * what its next step would read (`SourceRead`).
 */
export async function artefactArrived(
  bb: Blackboard,

  a: Artefact,
  claim: Claim | null,
): Promise<{
  claimId: string | null;
  created: boolean;
  sourceClaims: (string | null)[];
  sourceReads: (SourceRead | null)[];
}> {
  const sources = a.source_artefacts;
  const res = (await artefactArrivedScript.run(
    bb.redis,
    [
      bb.k.artefactIndex,
      bb.k.claimByArtefact(a.id),
      bb.k.claim(claim?.id ?? ''),
      bb.k.claimIndex,
      bb.k.activeClaims,
      bb.k.channels.claimEvents,
      bb.k.channels.claimUpdates,
      ...sources.flatMap((src) => [bb.k.children(src), bb.k.claimByArtefact(src)]),
    ],
    claim
      ? [
          a.id,
          a.created_at_ms,
          sources.length,
          bb.k.prefix,
          '1',
          claim.id,
          Date.now(),
          JSON.stringify(claimToJson(claim)),
          ...flat(claimToHash(claim)),
        ]
      : [a.id, a.created_at_ms, sources.length, bb.k.prefix, '0'],
  )) as [string, number, ...unknown[]];
  const [claimId, created, ...rest] = res;
  const owners = (rest.slice(0, sources.length) as string[]).map((o) => o || null);
  const sourceReads = owners.map((o, i) => (o ? sourceRead(a, rest[sources.length + i]) : null));
  return { claimId: claimId || null, created: created === 1, sourceClaims: owners, sourceReads };
}

/**
 * Claims with what a step decides on, in one round trip (one Lua read): each one's bids and target
 * when asked for, and the target's children; null for a claim that does not exist. `known` is the
 * claim as the caller last read or wrote it: while the claim is still at that rev it is not sent
 * again (every write goes through the compare-and-set on rev, so the same rev means the same claim).
 * A claim that cannot be read (malformed, a key of the wrong type) gets an Error in its place; the
 * others are unaffected.
 */
export async function claimSnapshots(
  bb: Blackboard,
  reqs: SnapshotRequest[],
): Promise<(ClaimSnapshot | null | Error)[]> {
  const keys: string[] = [];
  const args: string[] = [bb.k.prefix];
  for (const r of reqs) {
    keys.push(bb.k.claim(r.id), bb.k.bids(r.id));
    args.push(
      r.bids ? '1' : '0',
      r.target ? '1' : '0',
      r.known ? String(r.known.rev) : '',
      r.known?.claim.artefact_id ?? '',
    );
  }
  const all = (await claimSnapshotScript.run(bb.redis, keys, args)) as (unknown[] | string)[];
  return reqs.map((r, i) => {
    const res = all[i] ?? [];
    // A key the script cannot read as a claim (a wrong type) is as malformed as a bad field. Any
    // other error is the store's, not the data's: the step fails and is retried.
    if (typeof res === 'string')
      return res.includes('WRONGTYPE')
        ? lenient(bb.onMalformed, () => {
            throw new BlackboardDataError('claim', r.id, res);
          })
        : new Error(`claim ${r.id}: ${res}`);
    try {
      return parseSnapshot(bb.onMalformed, r, res);
    } catch (e) {
      return e instanceof Error ? e : new Error(String(e));
    }
  });
}

/**
 * Compare-and-sets in one script call, each applied or refused on its own: a claim is written only
 * if it is still at `rev`, then its `announce` messages are published in the same script (only when
 * the write happened). Given `previous` (the claim at `rev`), only the fields that changed are
 * written. Each gets its new rev, null on conflict, or an Error when its update failed.
 */
export async function updateClaims(bb: Blackboard, reqs: ClaimUpdate[]): Promise<(number | null | Error)[]> {
  const keys: string[] = [];
  const args: (string | number)[] = [];
  for (const { claim, rev, announce = [], previous } of reqs) {
    keys.push(bb.k.claim(claim.id), bb.k.activeClaims, bb.k.channels.claimUpdates, bb.k.dormantClaims);
    const mine = [
      String(rev),
      claim.id,
      FINAL.has(claim.status) ? '1' : claim.dormant_reason ? '2' : '0',
      JSON.stringify(claimToJson(claim)),
      announce.length,
      ...announce.flatMap((p) => [p.channel, p.message]),
      ...(previous ? changedFields(claimToHash(previous), claimToHash(claim)) : flat(claimToHash(claim))),
    ];
    args.push(mine.length, ...mine);
  }
  const res = (await updateClaimsScript.run(bb.redis, keys, args)) as (number | string)[];
  return reqs.map((q, i) => {
    const r = res[i] ?? -1;
    if (typeof r === 'string') return new Error(`claim ${q.claim.id}: ${r}`);
    return r < 0 ? null : r;
  });
}

/** The compare-and-set revision of each claim (null when missing), one round trip. */
export async function claimRevs(bb: Blackboard, ids: string[]): Promise<(number | null)[]> {
  return bb.pipelined(
    ids,
    (p, id) => p.hget(bb.k.claim(id), 'rev'),
    (v) => (v === null || v === undefined ? null : Number(v)),
  );
}

/** Ids of the artefacts that list `artefactId` among their sources (the outputs of its claims). */
export async function childrenOf(bb: Blackboard, artefactId: string): Promise<string[]> {
  return bb.redis.smembers(bb.k.children(artefactId));
}

/**
 * Adds artefacts written by someone else (Holt's own pups HSET directly) to our indexes, so the
 * reconcile loop and output lookups see them. Idempotent; keeps an existing index score.
 */
export async function indexArtefacts(bb: Blackboard, artefacts: Artefact[]): Promise<void> {
  if (!artefacts.length) return;
  const p = bb.redis.pipeline();
  for (const a of artefacts) {
    p.zadd(bb.k.artefactIndex, 'NX', a.created_at_ms, a.id);
    for (const src of a.source_artefacts) p.sadd(bb.k.children(src), a.id);
  }
  for (const [err] of (await p.exec()) ?? []) if (err) throw err;
}

/**
 * Finds artefacts missing from the artefact index (written by Holt's own tools: a plain HSET and a
 * PUBLISH, no index) with one SCAN over the artefact keys, and indexes them. For the orchestrator's
 * recovery, and for a tool (the CLI) that lists through the index and may run without an orchestrator.
 * Malformed hashes are reported, not thrown.
 */
export async function indexMissingArtefacts(
  bb: Blackboard,
  count = 1000,
): Promise<{ indexed: Artefact[]; malformed: string[] }> {
  const prefix = bb.k.artefact('');
  const indexed: Artefact[] = [];
  const malformed: string[] = [];
  const done = new Set<string>(); // SCAN may return a key twice
  let cursor = '0';
  do {
    const [next, found] = await bb.redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', count, 'TYPE', 'hash');
    cursor = next;
    const ids = found.map((key) => key.slice(prefix.length)).filter((id) => id && !done.has(id));
    for (const id of ids) done.add(id);
    const scores = await bb.pipelined(
      ids,
      (p, id) => p.zscore(bb.k.artefactIndex, id),
      (v) => v,
    );
    const missing = ids.filter((_, i) => scores[i] === null || scores[i] === undefined);
    const hashes = await bb.pipelined(
      missing,
      (p, id) => p.hgetall(bb.k.artefact(id)),
      (v) => (v ?? {}) as Record<string, string>,
    );
    const batch: Artefact[] = [];
    missing.forEach((id, i) => {
      const h = hashes[i] ?? {};
      if (!Object.keys(h).length) return; // deleted since the SCAN
      const a = artefactOf(bb.onMalformed, id, h);
      if (a) batch.push(a);
      else malformed.push(id);
    });
    await indexArtefacts(bb, batch);
    indexed.push(...batch);
  } while (cursor !== '0');
  return { indexed, malformed };
}

/** Artefact ids with their index score (created_at_ms) at or after `sinceMs`. */
export async function artefactIdsSince(
  bb: Blackboard,
  sinceMs: number,
): Promise<{ id: string; ms: number }[]> {
  const flatRes = await bb.redis.zrangebyscore(bb.k.artefactIndex, sinceMs, '+inf', 'WITHSCORES');
  const out: { id: string; ms: number }[] = [];
  for (let i = 0; i + 1 < flatRes.length; i += 2) out.push({ id: flatRes[i]!, ms: Number(flatRes[i + 1]) });
  return out;
}

/** claim_by_artefact for many artefacts in one round trip. */
export async function claimIdsForArtefacts(
  bb: Blackboard,
  artefactIds: string[],
): Promise<(string | null)[]> {
  if (!artefactIds.length) return [];
  return bb.redis.mget(artefactIds.map((id) => bb.k.claimByArtefact(id)));
}

/** The claim on each of these artefacts that has one, by artefact id (two round trips in all). */
export async function claimsForArtefacts(bb: Blackboard, artefactIds: string[]): Promise<Map<string, Claim>> {
  const ids = (await claimIdsForArtefacts(bb, artefactIds)).filter((c): c is string => c !== null);
  const claims = new Map<string, Claim>();
  for (const vc of await bb.getClaims(ids)) if (vc) claims.set(vc.claim.artefact_id, vc.claim);
  return claims;
}

/** Moves claims already marked dormant out of the active set (a one-off for claims from before the dormant set). */
export async function moveToDormant(bb: Blackboard, ids: string[]): Promise<void> {
  if (!ids.length) return;
  const p = bb.redis.pipeline();
  for (const id of ids) p.smove(bb.k.activeClaims, bb.k.dormantClaims, id);
  for (const [err] of (await p.exec()) ?? []) if (err) throw err;
}

/** Holt's paused grants (M3.5): role -> claim ids, oldest first. */
export async function grantQueues(bb: Blackboard): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const prefix = bb.k.grantQueue('');
  let cursor = '0';
  do {
    const [next, found] = await bb.redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', '500');
    cursor = next;
    for (const key of found) out.set(key.slice(prefix.length), await bb.redis.zrange(key, '0', '-1'));
  } while (cursor !== '0');
  return out;
}

export async function removeFromGrantQueue(bb: Blackboard, role: string, claimId: string): Promise<void> {
  await bb.redis.zrem(bb.k.grantQueue(role), claimId);
}
