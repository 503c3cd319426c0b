import { z } from 'zod';
import type { Blackboard } from './client.ts';
import { pruneClaimsScript, pruneWorkflowScript } from './retention-scripts.ts';
import { ClaimStatus, StructuralType, takesClaim } from './types.ts';

/**
 * Retention of the blackboard: a finished workflow older than the cut-off leaves Redis, whole.
 *
 * A workflow is a connected component of artefacts (sources and children both ways, so a workflow
 * that cites another is kept or pruned with it) with the claims on them. It is finished when every
 * claim on it is complete, terminated or dormant (nothing left to grant) and every artefact that takes
 * a claim has one; it is old when its newest artefact was written before the cut-off. Anything that
 * does not parse keeps the whole component: it is the quarantine's business, never retention's.
 */

/** What retention reads of an artefact (no payload). */
const ArtefactHead = z.object({
  id: z.string().min(1),
  logical_id: z.string().min(1),
  structural_type: StructuralType,
  source_artefacts: z.array(z.string()),
  created_at_ms: z.number().int(),
});
type ArtefactHead = z.infer<typeof ArtefactHead>;

/** What retention reads of a claim. */
export interface ClaimHead {
  id: string;
  status: string;
  dormant: boolean;
}

/** A component as read: each artefact id's head, or why it has none. */
export interface WorkflowSnapshot {
  artefacts: Map<string, ArtefactHead | 'missing' | 'malformed'>;
  /** claim_by_artefact of each artefact id (absent: none). */
  claimOf: Map<string, string>;
  claims: Map<string, ClaimHead | 'missing'>;
  /** Claims in the active set (an unfinished claim may still be there if its hash lags). */
  active: Set<string>;
  /** The component is larger than the read limit: never pruned whole. */
  truncated: boolean;
}

export type KeepReason = 'recent' | 'unfinished' | 'unreadable' | 'too_large';
export type Verdict = { prune: true } | { prune: false; why: KeepReason };

const FINAL = new Set<string>(['complete', 'terminated']);

/** Whether a finished, old component may go (pure: the decision over what was read). */
export function workflowVerdict(s: WorkflowSnapshot, cutoffMs: number): Verdict {
  if (s.truncated) return { prune: false, why: 'too_large' };
  for (const a of s.artefacts.values()) {
    if (a === 'malformed') return { prune: false, why: 'unreadable' };
    if (a !== 'missing' && a.created_at_ms >= cutoffMs) return { prune: false, why: 'recent' };
  }
  for (const [id, a] of s.artefacts) {
    if (typeof a !== 'object' || !takesClaim(a.structural_type)) continue;
    if (!s.claimOf.has(id)) return { prune: false, why: 'unfinished' }; // not yet seen by the orchestrator
  }
  for (const [id, c] of s.claims) {
    if (c === 'missing' || s.active.has(id)) return { prune: false, why: 'unfinished' };
    if (!FINAL.has(c.status) && !c.dormant) return { prune: false, why: 'unfinished' };
  }
  return { prune: true };
}

const int = (v: string | null) => (v !== null && /^-?\d+$/.test(v) ? Number(v) : Number.NaN);
const jsonArray = (v: string | null): unknown => {
  if (v === null || v === '' || v === 'null') return [];
  try {
    return JSON.parse(v);
  } catch {
    return null;
  }
};

/** Reads the component of `rootId`, level by level (one pipelined round trip per level), up to `limit` artefacts. */
export async function readWorkflow(bb: Blackboard, rootId: string, limit: number): Promise<WorkflowSnapshot> {
  const s: WorkflowSnapshot = {
    artefacts: new Map(),
    claimOf: new Map(),
    claims: new Map(),
    active: new Set(),
    truncated: false,
  };
  let level = [rootId];
  while (level.length) {
    if (s.artefacts.size + level.length > limit) {
      s.truncated = true;
      return s;
    }
    const p = bb.redis.pipeline();
    for (const id of level) {
      p.hmget(bb.k.artefact(id), 'id', 'logical_id', 'structural_type', 'source_artefacts', 'created_at_ms');
      p.smembers(bb.k.children(id));
      p.get(bb.k.claimByArtefact(id));
    }
    const res = (await p.exec()) ?? [];
    const next = new Set<string>();
    level.forEach((id, i) => {
      const [e1, f] = res[3 * i] ?? [];
      const [e2, kids] = res[3 * i + 1] ?? [];
      const [e3, claim] = res[3 * i + 2] ?? [];
      const err = e1 ?? e2 ?? e3;
      if (err) throw err;
      const [aid, logical, st, sources, created] = f as (string | null)[];
      const head =
        aid === null
          ? 'missing'
          : ((): ArtefactHead | 'malformed' => {
              const r = ArtefactHead.safeParse({
                id: aid,
                logical_id: logical,
                structural_type: st,
                source_artefacts: jsonArray(sources ?? null),
                created_at_ms: int(created ?? null),
              });
              return r.success && r.data.id === id ? r.data : 'malformed';
            })();
      s.artefacts.set(id, head);
      if (typeof claim === 'string') s.claimOf.set(id, claim);
      const around = [...(kids as string[]), ...(typeof head === 'object' ? head.source_artefacts : [])];
      for (const n of around) if (!s.artefacts.has(n)) next.add(n);
    });
    level = [...next];
  }
  await readClaims(bb, s);
  return s;
}

async function readClaims(bb: Blackboard, s: WorkflowSnapshot): Promise<void> {
  const ids = [...new Set(s.claimOf.values())];
  if (!ids.length) return;
  const p = bb.redis.pipeline();
  for (const id of ids) {
    p.hmget(bb.k.claim(id), 'status', 'dormant_reason');
    p.sismember(bb.k.activeClaims, id);
  }
  const res = (await p.exec()) ?? [];
  ids.forEach((id, i) => {
    const [e1, f] = res[2 * i] ?? [];
    const [e2, isActive] = res[2 * i + 1] ?? [];
    if (e1 ?? e2) throw e1 ?? e2;
    const [status, dormant] = f as (string | null)[];
    const known = ClaimStatus.safeParse(status);
    // An unknown status is not a finished one: the claim (and its workflow) stays.
    s.claims.set(
      id,
      status === null ? 'missing' : { id, status: known.success ? known.data : '?', dormant: !!dormant },
    );
    if (isActive === 1) s.active.add(id);
  });
}

/** What one retention pass over the blackboard did. */
export interface BlackboardPruned {
  workflows: number;
  artefacts: number;
  claims: number;
  /** Old components kept, by why (a workflow still running, or one that could not be read). */
  kept: Record<KeepReason, number>;
  /** Where the next pass resumes in the old part of the artefact index (0: from the start). */
  nextOffset: number;
}

export interface PruneOptions {
  olderThanMs: number;
  now?: number;
  /** Resume point from the previous pass (its nextOffset). */
  offset?: number;
  /** Artefacts looked at per pass, at most (the rest next pass). */
  maxArtefacts?: number;
  /** A component larger than this is kept and counted as too_large. */
  maxComponent?: number;
  page?: number;
}

/**
 * One retention pass: finished workflows whose newest artefact is older than the cut-off leave Redis,
 * each in one script that re-checks what it deletes (a child or claim that appeared since the read
 * keeps it). Then claims older than the cut-off whose artefact is gone and that are finished (a
 * feedback claim's predecessor, leftovers of lost data) go too.
 */
export async function pruneBlackboard(bb: Blackboard, o: PruneOptions): Promise<BlackboardPruned> {
  const now = o.now ?? Date.now();
  const cutoff = now - o.olderThanMs;
  const page = o.page ?? 200;
  const maxArtefacts = o.maxArtefacts ?? 5_000;
  const maxComponent = o.maxComponent ?? 2_000;
  const out: BlackboardPruned = {
    workflows: 0,
    artefacts: 0,
    claims: 0,
    kept: { recent: 0, unfinished: 0, unreadable: 0, too_large: 0 },
    nextOffset: 0,
  };
  const seen = new Set<string>();
  let offset = o.offset ?? 0;
  let looked = 0;
  for (;;) {
    const ids = await bb.redis.zrangebyscore(bb.k.artefactIndex, '-inf', `(${cutoff}`, 'LIMIT', offset, page);
    if (!ids.length) {
      offset = 0; // reached the end: the next pass starts over
      break;
    }
    let gone = 0;
    for (const id of ids) {
      if (seen.has(id)) continue;
      const snap = await readWorkflow(bb, id, maxComponent);
      for (const a of snap.artefacts.keys()) seen.add(a);
      looked += snap.artefacts.size;
      const v = workflowVerdict(snap, cutoff);
      if (!v.prune) {
        out.kept[v.why]++;
        continue;
      }
      const r = await deleteWorkflow(bb, snap);
      if (!r) {
        out.kept.unfinished++;
        continue;
      }
      out.workflows++;
      out.artefacts += r.artefacts;
      out.claims += r.claims;
      gone += ids.filter((x) => snap.artefacts.has(x)).length;
    }
    offset += ids.length - gone;
    if (looked >= maxArtefacts) break;
  }
  out.nextOffset = offset;
  out.claims += await pruneOrphanClaims(bb, cutoff, page);
  return out;
}

/** Deletes a component read by readWorkflow, unless it changed since (then null). */
export async function deleteWorkflow(
  bb: Blackboard,
  s: WorkflowSnapshot,
): Promise<{ artefacts: number; claims: number } | null> {
  const artefacts = [...s.artefacts].map(([id, a]) => ({
    id,
    logical: typeof a === 'object' ? a.logical_id : '',
  }));
  const claims = [...s.claims.keys()];
  const keys = [
    bb.k.artefactIndex,
    bb.k.claimIndex,
    bb.k.activeClaims,
    bb.k.dormantClaims,
    ...artefacts.flatMap((a) => [
      bb.k.artefact(a.id),
      bb.k.claimByArtefact(a.id),
      bb.k.children(a.id),
      a.logical ? bb.k.thread(a.logical) : bb.k.thread(`-${a.id}`),
    ]),
    ...claims.flatMap((c) => [bb.k.claim(c), bb.k.bids(c)]),
  ];
  const args = [artefacts.length, claims.length, ...artefacts.map((a) => a.id), ...claims];
  const res = (await pruneWorkflowScript.run(bb.redis, keys, args)) as number[];
  return res[0] === 1 ? { artefacts: res[1] ?? 0, claims: res[2] ?? 0 } : null;
}

/** Finished claims created before the cut-off whose artefact is gone (a page at a time). */
async function pruneOrphanClaims(bb: Blackboard, cutoff: number, page: number): Promise<number> {
  let pruned = 0;
  let offset = 0;
  for (;;) {
    const ids = await bb.redis.zrangebyscore(bb.k.claimIndex, '-inf', `(${cutoff}`, 'LIMIT', offset, page);
    if (!ids.length) return pruned;
    const p = bb.redis.pipeline();
    for (const id of ids) p.hget(bb.k.claim(id), 'artefact_id');
    const targets = ((await p.exec()) ?? []).map(([e, v]) => (e ? null : (v as string | null)));
    const keys: string[] = [bb.k.claimIndex, bb.k.activeClaims, bb.k.dormantClaims];
    const cand: string[] = [];
    ids.forEach((id, i) => {
      const t = targets[i];
      if (!t) return; // a malformed or lost claim hash: left to the quarantine
      cand.push(id);
      keys.push(bb.k.claim(id), bb.k.bids(id), bb.k.artefact(t));
    });
    const n = cand.length ? ((await pruneClaimsScript.run(bb.redis, keys, [...cand])) as number) : 0;
    pruned += n;
    offset += ids.length - n;
  }
}
