import { type ChainableCommander, Redis, type RedisOptions } from 'ioredis';
import {
  artefactToHash,
  BlackboardDataError,
  claimToHash,
  claimToJson,
  hashToArtefact,
  hashToClaim,
} from './codec.ts';
import { goEscape, goMapJson, sortedKeys } from './go-json.ts';
import { type Keys, keys } from './keys.ts';
import { contextThreadsScript, releaseLeaseScript, renewLeaseScript } from './pup-scripts.ts';
import {
  acquireLockScript,
  artefactArrivedScript,
  claimSnapshotScript,
  createArtefactScript,
  createClaimScript,
  releaseLockScript,
  setAgentsScript,
  updateClaimsScript,
} from './scripts.ts';
import {
  AgentRegistration,
  Artefact,
  type BidType,
  type Claim,
  type ClaimType,
  type GrantNotification,
  HOLT_WORKFLOW_EVENTS,
  Quarantined,
  type WorkflowEvent,
} from './types.ts';
import { readWorkerExits, reportWorkerExit, type WorkerExit } from './worker-exits.ts';

const safeJson = (s: string): unknown => {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
};

export interface VersionedClaim {
  claim: Claim;
  /** Compare-and-set revision (our extension field `rev`; Holt ignores it). */
  rev: number;
}

/** A pub/sub message, ready to send. */
export interface Publication {
  channel: string;
  message: string;
}

export type NewArtefact = Omit<Artefact, 'created_at_ms'> & { created_at_ms?: number };

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

function toHash(flatHash: unknown): Record<string, string> {
  const h: Record<string, string> = {};
  const a = (flatHash ?? []) as string[];
  for (let j = 0; j + 1 < a.length; j += 2) h[a[j] as string] = a[j + 1] as string;
  return h;
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

/** Where reads report an item they skipped because it does not parse (see `Blackboard`). */
export type MalformedSink = (e: BlackboardDataError) => void;

/** `parse()`, or null after reporting a malformed item to `sink`; other errors are thrown. */
function lenient<T>(sink: MalformedSink, parse: () => T): T | null {
  try {
    return parse();
  } catch (e) {
    if (!(e instanceof BlackboardDataError)) throw e;
    sink(e);
    return null;
  }
}

/** A stored claim hash, or null (reported) when malformed. */
function claimOf(sink: MalformedSink, id: string, h: Record<string, string>): VersionedClaim | null {
  return lenient(sink, () => ({ claim: hashToClaim(id, h), rev: Number(h.rev ?? 0) }));
}

/** A stored artefact hash, or null (reported) when malformed. */
function artefactOf(sink: MalformedSink, id: string, h: Record<string, string>): Artefact | null {
  return lenient(sink, () => hashToArtefact(id, h));
}

/**
 * The artefacts of a script reply's id, flat hash, id, flat hash, ... run from `from` on (gone ones
 * skipped, malformed ones reported and skipped: one bad child must not stop its claim).
 */
function childrenFrom(sink: MalformedSink, reply: unknown[], from: number): Map<string, Artefact> {
  const children = new Map<string, Artefact>();
  for (let i = from; i + 1 < reply.length; i += 2) {
    const cid = reply[i] as string;
    const ch = toHash(reply[i + 1]);
    const a = Object.keys(ch).length ? artefactOf(sink, cid, ch) : null;
    if (a) children.set(cid, a);
  }
  return children;
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

function flat(h: Record<string, string>): string[] {
  const out: string[] = [];
  for (const k in h) out.push(k, h[k] as string);
  return out;
}

/** Field/value pairs of `next` that differ from `prev`; a field `next` no longer has becomes ''. */
function changedFields(prev: Record<string, string>, next: Record<string, string>): string[] {
  const out: string[] = [];
  for (const k in next) if (next[k] !== prev[k]) out.push(k, next[k] as string);
  for (const k in prev) if (!(k in next)) out.push(k, '');
  return out;
}

/** How many skipped items a blackboard remembers for its owner to report (`malformed`). */
const MALFORMED_KEPT = 1_000;

/** The default cap on an artefact's payload (UTF-8 bytes): Redis holds every payload in memory. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

export interface BlackboardOptions {
  /** Where reads report a stored item that does not parse (default: kept in `malformed`). */
  onMalformed?: MalformedSink;
  /** Artefacts with a larger payload are refused (PayloadTooLargeError). Default 1 MiB. */
  maxPayloadBytes?: number;
}

/** An artefact refused for its payload's size: the message names the size and the cap. */
export class PayloadTooLargeError extends Error {
  readonly bytes: number;
  readonly cap: number;
  constructor(bytes: number, cap: number) {
    super(`payload of ${bytes} bytes exceeds the cap of ${cap} bytes (HOLT_MAX_PAYLOAD_BYTES)`);
    this.name = 'PayloadTooLargeError';
    this.bytes = bytes;
    this.cap = cap;
  }
}

/** The error for a payload over `cap` UTF-8 bytes, or null. */
function oversize(payload: string, cap: number): PayloadTooLargeError | null {
  // Cheap first: a string of n UTF-16 units has at most 3n UTF-8 bytes.
  if (payload.length * 3 <= cap) return null;
  const bytes = Buffer.byteLength(payload, 'utf8');
  return bytes > cap ? new PayloadTooLargeError(bytes, cap) : null;
}

/** Why `payload` may not be stored (over `cap` UTF-8 bytes), or null. */
export function payloadProblem(payload: string, cap: number): string | null {
  return oversize(payload, cap)?.message ?? null;
}

/** Throws PayloadTooLargeError when `payload` is over `cap` UTF-8 bytes. */
export function checkPayload(payload: string, cap: number): void {
  const e = oversize(payload, cap);
  if (e) throw e;
}

/**
 * Typed access to one instance's blackboard. Every write that must not race is one Lua script
 * (write-once artefacts, idempotent claim creation, compare-and-set claim updates).
 *
 * Reads never fail on one bad item: a stored claim or artefact that does not parse reads as missing
 * and goes to `onMalformed` (the orchestrator quarantines it; the default keeps the last ones in
 * `malformed`), so one poison hash cannot stop a recovery, a scan or its siblings.
 */
export class Blackboard {
  readonly k: Keys;
  readonly redis: Redis;
  readonly instance: string;
  /** Items skipped as malformed, by `kind:id` (the last MALFORMED_KEPT), when no sink was given. */
  readonly malformed = new Map<string, BlackboardDataError>();
  readonly #sink: MalformedSink;
  readonly maxPayloadBytes: number;

  constructor(redis: Redis, instance: string, opts: BlackboardOptions = {}) {
    this.redis = redis;
    this.instance = instance;
    this.k = keys(instance);
    this.maxPayloadBytes = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    this.#sink =
      opts.onMalformed ??
      ((e) => {
        this.malformed.delete(`${e.kind}:${e.id}`);
        this.malformed.set(`${e.kind}:${e.id}`, e);
        if (this.malformed.size > MALFORMED_KEPT)
          this.malformed.delete(this.malformed.keys().next().value ?? '');
      });
  }

  static connect(
    url: string,
    instance: string,
    opts: RedisOptions = {},
    bbOpts: BlackboardOptions = {},
  ): Blackboard {
    return new Blackboard(new Redis(url, { maxRetriesPerRequest: 3, ...opts }), instance, bbOpts);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }

  // ---- artefacts ----

  /** Validates and writes an artefact once. Returns false (and writes nothing) when the id exists. */
  async createArtefact(input: NewArtefact): Promise<{ created: boolean; artefact: Artefact }> {
    const artefact = Artefact.parse({ ...input, created_at_ms: input.created_at_ms || Date.now() });
    checkPayload(artefact.payload, this.maxPayloadBytes);
    const json = JSON.stringify(artefact);
    const res = await createArtefactScript.run(
      this.redis,
      [
        this.k.artefact(artefact.id),
        this.k.thread(artefact.logical_id),
        this.k.artefactIndex,
        this.k.channels.artefactEvents,
        ...new Set(artefact.source_artefacts.map((src) => this.k.children(src))),
      ],
      [artefact.id, artefact.version, artefact.created_at_ms, json, ...flat(artefactToHash(artefact))],
    );
    return { created: res === 1, artefact };
  }

  async getArtefact(id: string): Promise<Artefact | null> {
    const h = await this.redis.hgetall(this.k.artefact(id));
    return Object.keys(h).length ? artefactOf(this.#sink, id, h) : null;
  }

  /** One pipelined round trip; null for a missing id. */
  async getArtefacts(ids: string[]): Promise<(Artefact | null)[]> {
    return this.pipelined(
      ids,
      (p, id) => p.hgetall(this.k.artefact(id)),
      (v, id) => {
        const hash = (v ?? {}) as Record<string, string>;
        return Object.keys(hash).length ? artefactOf(this.#sink, id, hash) : null;
      },
    );
  }

  /** Latest version id of each thread (one pipelined round trip). */
  async latestInThreads(logicalIds: string[]): Promise<Map<string, { id: string; version: number }>> {
    const out = new Map<string, { id: string; version: number }>();
    const res = await this.pipelined(
      logicalIds,
      (p, l) => p.zrevrange(this.k.thread(l), 0, 0, 'WITHSCORES'),
      (v) => (v ?? []) as string[],
    );
    logicalIds.forEach((l, i) => {
      const [id, score] = res[i] ?? [];
      if (id && score) out.set(l, { id, version: Number(score) });
    });
    return out;
  }

  /** Artefact ids in creation order within [sinceMs, untilMs]. */
  async listArtefactIds(
    opts: { sinceMs?: number; untilMs?: number; limit?: number } = {},
  ): Promise<string[]> {
    const min = opts.sinceMs ?? '-inf';
    const max = opts.untilMs ?? '+inf';
    if (opts.limit) return this.redis.zrangebyscore(this.k.artefactIndex, min, max, 'LIMIT', 0, opts.limit);
    return this.redis.zrangebyscore(this.k.artefactIndex, min, max);
  }

  // ---- claims ----

  /**
   * Creates a claim for its artefact unless one exists (then returns the existing id). A feedback
   * claim passes `overwriteIndex` (Holt's behaviour: it replaces claim_by_artefact for the target).
   */
  async createClaim(
    claim: Claim,
    opts: { overwriteIndex?: boolean } = {},
  ): Promise<{ created: boolean; id: string }> {
    const json = JSON.stringify(claimToJson(claim));
    const id = (await createClaimScript.run(
      this.redis,
      [
        this.k.claim(claim.id),
        this.k.claimByArtefact(claim.artefact_id),
        this.k.claimIndex,
        claim.dormant_reason ? this.k.dormantClaims : this.k.activeClaims,
        this.k.channels.claimEvents,
        this.k.channels.claimUpdates,
      ],
      [claim.id, Date.now(), json, opts.overwriteIndex ? '1' : '0', ...flat(claimToHash(claim))],
    )) as string;
    return { created: id === claim.id, id };
  }

  /**
   * An artefact the orchestrator heard of, in one round trip: indexes it (idempotent), creates `claim`
   * for it unless it has one (null: it takes none), and returns the claims of its sources, each with
   * what its next step would read (`SourceRead`).
   */
  async artefactArrived(
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
      this.redis,
      [
        this.k.artefactIndex,
        this.k.claimByArtefact(a.id),
        this.k.claim(claim?.id ?? ''),
        this.k.claimIndex,
        this.k.activeClaims,
        this.k.channels.claimEvents,
        this.k.channels.claimUpdates,
        ...sources.flatMap((src) => [this.k.children(src), this.k.claimByArtefact(src)]),
      ],
      claim
        ? [
            a.id,
            a.created_at_ms,
            sources.length,
            this.k.prefix,
            '1',
            claim.id,
            Date.now(),
            JSON.stringify(claimToJson(claim)),
            ...flat(claimToHash(claim)),
          ]
        : [a.id, a.created_at_ms, sources.length, this.k.prefix, '0'],
    )) as [string, number, ...unknown[]];
    const [claimId, created, ...rest] = res;
    const owners = (rest.slice(0, sources.length) as string[]).map((o) => o || null);
    const sourceReads = owners.map((o, i) => (o ? sourceRead(a, rest[sources.length + i]) : null));
    return { claimId: claimId || null, created: created === 1, sourceClaims: owners, sourceReads };
  }

  async getClaim(id: string): Promise<VersionedClaim | null> {
    const h = await this.redis.hgetall(this.k.claim(id));
    if (!Object.keys(h).length) return null;
    return claimOf(this.#sink, id, h);
  }

  /**
   * Claims with what a step decides on, in one round trip (one Lua read): each one's bids and target
   * when asked for, and the target's children; null for a claim that does not exist. `known` is the
   * claim as the caller last read or wrote it: while the claim is still at that rev it is not sent
   * again (every write goes through the compare-and-set on rev, so the same rev means the same claim).
   * A claim that cannot be read (malformed, a key of the wrong type) gets an Error in its place; the
   * others are unaffected.
   */
  async claimSnapshots(reqs: SnapshotRequest[]): Promise<(ClaimSnapshot | null | Error)[]> {
    const keys: string[] = [];
    const args: string[] = [this.k.prefix];
    for (const r of reqs) {
      keys.push(this.k.claim(r.id), this.k.bids(r.id));
      args.push(
        r.bids ? '1' : '0',
        r.target ? '1' : '0',
        r.known ? String(r.known.rev) : '',
        r.known?.claim.artefact_id ?? '',
      );
    }
    const all = (await claimSnapshotScript.run(this.redis, keys, args)) as (unknown[] | string)[];
    return reqs.map((r, i) => {
      const res = all[i] ?? [];
      // A key the script cannot read as a claim (a wrong type) is as malformed as a bad field. Any
      // other error is the store's, not the data's: the step fails and is retried.
      if (typeof res === 'string')
        return res.includes('WRONGTYPE')
          ? lenient(this.#sink, () => {
              throw new BlackboardDataError('claim', r.id, res);
            })
          : new Error(`claim ${r.id}: ${res}`);
      try {
        return parseSnapshot(this.#sink, r, res);
      } catch (e) {
        return e instanceof Error ? e : new Error(String(e));
      }
    });
  }

  async getClaims(ids: string[]): Promise<(VersionedClaim | null)[]> {
    return this.pipelined(
      ids,
      (p, id) => p.hgetall(this.k.claim(id)),
      (v, id) => {
        const hash = (v ?? {}) as Record<string, string>;
        return Object.keys(hash).length ? claimOf(this.#sink, id, hash) : null;
      },
    );
  }

  /**
   * Compare-and-sets in one script call, each applied or refused on its own: a claim is written only
   * if it is still at `rev`, then its `announce` messages are published in the same script (only when
   * the write happened). Given `previous` (the claim at `rev`), only the fields that changed are
   * written. Each gets its new rev, null on conflict, or an Error when its update failed.
   */
  async updateClaims(reqs: ClaimUpdate[]): Promise<(number | null | Error)[]> {
    const keys: string[] = [];
    const args: (string | number)[] = [];
    for (const { claim, rev, announce = [], previous } of reqs) {
      keys.push(
        this.k.claim(claim.id),
        this.k.activeClaims,
        this.k.channels.claimUpdates,
        this.k.dormantClaims,
      );
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
    const res = (await updateClaimsScript.run(this.redis, keys, args)) as (number | string)[];
    return reqs.map((q, i) => {
      const r = res[i] ?? -1;
      if (typeof r === 'string') return new Error(`claim ${q.claim.id}: ${r}`);
      return r < 0 ? null : r;
    });
  }

  /**
   * Claims that may still need bids or execution: neither complete/terminated nor dormant. (Claims
   * made dormant before the dormant set existed stay here until the orchestrator's recovery moves them.)
   */
  async activeClaimIds(): Promise<string[]> {
    return this.redis.smembers(this.k.activeClaims);
  }

  /** Dormant claims: nothing is left to grant on them, and nothing to bid (Holt keeps them pending). */
  async dormantClaimIds(): Promise<string[]> {
    return this.redis.smembers(this.k.dormantClaims);
  }

  /** Moves claims already marked dormant out of the active set (a one-off for claims from before the dormant set). */
  async moveToDormant(ids: string[]): Promise<void> {
    if (!ids.length) return;
    const p = this.redis.pipeline();
    for (const id of ids) p.smove(this.k.activeClaims, this.k.dormantClaims, id);
    for (const [err] of (await p.exec()) ?? []) if (err) throw err;
  }

  async listClaimIds(): Promise<string[]> {
    return this.redis.zrange(this.k.claimIndex, '0', '-1');
  }

  // ---- bids ----

  /**
   * Writes a bid and announces it. `watch` also records the claim in the role's pup claims (same round
   * trip), so its pups' re-scan finds the claim's grant under any orchestrator.
   */
  async setBid(claimId: string, role: string, bid: BidType, watch = false): Promise<void> {
    const event = this.workflowEventPublication({
      event: 'bid_submitted',
      data: { claim_id: claimId, agent_name: role, bid_type: bid },
    });
    const m = this.redis.multi().hset(this.k.bids(claimId), role, bid);
    if (watch) m.zadd(this.k.pupClaims(role), 'NX', Date.now(), claimId);
    await m.publish(event.channel, event.message).exec();
  }

  /** Records claims in the role's pup claims (a feedback claim is assigned without a bid). */
  async watchClaims(role: string, claimIds: string[]): Promise<void> {
    if (!claimIds.length) return;
    const now = Date.now();
    await this.redis.zadd(this.k.pupClaims(role), 'NX', ...claimIds.flatMap((id) => [now, id]));
  }

  /**
   * The claims a pup's re-scan reads, in one round trip: the active index (this project's orchestrator)
   * and the role's pup claims (any orchestrator), de-duplicated.
   */
  async claimsToScan(role: string): Promise<{ active: string[]; watched: string[] }> {
    const res = (await this.redis
      .multi()
      .smembers(this.k.activeClaims)
      .zrange(this.k.pupClaims(role), 0, -1)
      .exec()) as [Error | null, string[]][] | null;
    for (const [err] of res ?? []) if (err) throw err;
    return { active: res?.[0]?.[1] ?? [], watched: res?.[1]?.[1] ?? [] };
  }

  /** Drops settled claims from the role's pup claims, those first seen before `olderThanMs`, and all but the newest `keep`. */
  async unwatchClaims(role: string, claimIds: string[], olderThanMs: number, keep: number): Promise<void> {
    const key = this.k.pupClaims(role);
    const m = this.redis.multi();
    if (claimIds.length) m.zrem(key, ...claimIds);
    await m
      .zremrangebyscore(key, '-inf', `(${olderThanMs}`)
      .zremrangebyrank(key, 0, -(keep + 1))
      .exec();
  }

  /** Raw bids (role -> value as written; the orchestrator sanitises unknown values). */
  async getBids(claimId: string): Promise<Record<string, string>> {
    return this.redis.hgetall(this.k.bids(claimId));
  }

  // ---- notifications ----

  /** Holt's grant notification for `role`, as a message. */
  grantPublication(role: string, claimId: string, claimType: ClaimType): Publication {
    const n: GrantNotification = { event_type: 'grant', claim_id: claimId, claim_type: claimType };
    // Holt sends a map[string]string: keys sorted.
    return { channel: this.k.channels.agentEvents(role), message: goMapJson(n) };
  }

  workflowEventPublication(ev: WorkflowEvent): Publication {
    // Holt's WorkflowEvent struct {event, data map[string]any}: the data's keys sorted.
    const message = goEscape(JSON.stringify({ event: ev.event, data: sortedKeys(ev.data) }));
    const ch = this.k.channels;
    return {
      channel: HOLT_WORKFLOW_EVENTS.has(ev.event) ? ch.workflowEvents : ch.workflowEventsExt,
      message,
    };
  }

  async publish(p: Publication): Promise<void> {
    await this.redis.publish(p.channel, p.message);
  }

  async publishWorkflowEvent(ev: WorkflowEvent): Promise<void> {
    await this.publish(this.workflowEventPublication(ev));
  }

  // ---- quarantine (extension) ----

  /** Sets an item aside; true when it is new (report it then, once), false when already there. */
  async quarantine(q: Omit<Quarantined, 'at_ms'>): Promise<boolean> {
    const entry: Quarantined = { ...q, at_ms: Date.now() };
    return (await this.redis.hsetnx(this.k.quarantine, `${q.kind}:${q.id}`, JSON.stringify(entry))) === 1;
  }

  /**
   * Sets a claim aside and takes it out of the active and dormant sets in one transaction (nothing
   * reads it again); true when it is new.
   */
  async quarantineClaim(q: Omit<Quarantined, 'at_ms'>): Promise<boolean> {
    const entry: Quarantined = { ...q, at_ms: Date.now() };
    const res = await this.redis
      .multi()
      .hsetnx(this.k.quarantine, `claim:${q.id}`, JSON.stringify(entry))
      .srem(this.k.activeClaims, q.id)
      .srem(this.k.dormantClaims, q.id)
      .exec();
    const [err, fresh] = res?.[0] ?? [new Error('transaction discarded'), 0];
    if (err) throw err;
    return fresh === 1;
  }

  // ---- worker exits (extension) ----

  /** A launcher's report of a worker that died (src/blackboard/worker-exits.ts). */
  reportWorkerExit(e: WorkerExit): Promise<void> {
    return reportWorkerExit(this.redis, this.k.workerExits, e);
  }

  /** Worker exit reports after stream id `after`, oldest first. */
  workerExits(after: string, count?: number): ReturnType<typeof readWorkerExits> {
    return readWorkerExits(this.redis, this.k.workerExits, after, count);
  }

  /** Everything set aside, oldest first; an unreadable entry is listed as such, never thrown. */
  async quarantined(): Promise<Quarantined[]> {
    const all = await this.redis.hgetall(this.k.quarantine);
    return Object.entries(all)
      .map(([field, v]) => {
        const r = Quarantined.safeParse(safeJson(v));
        if (r.success) return r.data;
        const [kind = 'unknown', ...id] = field.split(':');
        return { kind, id: id.join(':'), reason: 'unreadable quarantine entry', at_ms: 0 };
      })
      .sort((a, b) => a.at_ms - b.at_ms);
  }

  // ---- pup support ----

  /** For each claim, whether `role` has bid on it (one pipelined round trip). */
  async hasBids(claimIds: string[], role: string): Promise<boolean[]> {
    return this.pipelined(
      claimIds,
      (p, id) => p.hexists(this.k.bids(id), role),
      (v) => v === 1,
    );
  }

  /**
   * What a pup needs to bid, in one round trip: the stored claim, whether `role` has bid on it, and its
   * target. The target is read at `targetHint` (from the claim event), checked against the stored
   * claim, and read again only when the hint was wrong (a hint is never trusted).
   */
  async bidView(
    claimId: string,
    role: string,
    targetHint: string | undefined,
  ): Promise<{ claim: VersionedClaim | null; hasBid: boolean; target: Artefact | null | undefined }> {
    const p = this.redis.pipeline().hgetall(this.k.claim(claimId)).hexists(this.k.bids(claimId), role);
    if (targetHint) p.hgetall(this.k.artefact(targetHint));
    const res = (await p.exec()) ?? [];
    for (const [err] of res.slice(0, 2)) if (err) throw err;
    const ch = (res[0]?.[1] ?? {}) as Record<string, string>;
    const claim = Object.keys(ch).length ? claimOf(this.#sink, claimId, ch) : null;
    const hasBid = res[1]?.[1] === 1;
    // A wrong hint, or an unreadable target: the caller reads the target itself (and reports it).
    if (!claim || claim.claim.artefact_id !== targetHint || res[2]?.[0])
      return { claim, hasBid, target: undefined };
    const th = (res[2]?.[1] ?? {}) as Record<string, string>;
    return { claim, hasBid, target: Object.keys(th).length ? artefactOf(this.#sink, targetHint, th) : null };
  }

  /** Whether each artefact id exists (one pipelined round trip). */
  async artefactsExist(ids: string[]): Promise<boolean[]> {
    return this.pipelined(
      ids,
      (p, id) => p.exists(this.k.artefact(id)),
      (v) => v === 1,
    );
  }

  /**
   * One level of context assembly in one round trip (a pipeline): each id's artefact (HGETALL) and,
   * when its thread has a higher version, that latest version (one script call for the level). Missing
   * ids give nulls; malformed hashes are listed, not thrown.
   */
  async contextLevel(
    ids: string[],
  ): Promise<{ found: { artefact: Artefact | null; latest: Artefact | null }[]; malformed: string[] }> {
    if (!ids.length) return { found: [], malformed: [] };
    const args = [this.k.prefix, ...ids];
    const p = this.redis.pipeline();
    for (const id of ids) p.hgetall(this.k.artefact(id));
    p.evalsha(contextThreadsScript.sha, 0, ...args);
    const res = (await p.exec()) ?? [];
    for (const [err] of res.slice(0, ids.length)) if (err) throw err;
    const [scriptErr, scriptReply] = res[ids.length] ?? [null, []];
    let newer = scriptReply as string[][];
    if (scriptErr) {
      // A fresh or restarted server: load the script (EVAL) once, for this level.
      if (!scriptErr.message.startsWith('NOSCRIPT')) throw scriptErr;
      newer = (await contextThreadsScript.run(this.redis, [], args)) as string[][];
    }
    const malformed: string[] = [];
    const decode = (id: string, h: Record<string, string>): Artefact | null => {
      if (!Object.keys(h).length) return null;
      const a = artefactOf(this.#sink, h.id ?? id, h);
      if (!a) malformed.push(h.id ?? id);
      return a;
    };
    const found = ids.map((id, i) => ({
      artefact: decode(id, (res[i]?.[1] ?? {}) as Record<string, string>),
      latest: decode(id, toHash(newer[i])),
    }));
    return { found, malformed };
  }

  /** extension key: a pup's lease on one execution (its output artefact id), so no two pups run it at once. */
  executionLeaseKey(outputId: string): string {
    return `${this.k.prefix}pup:execution:${outputId}`;
  }

  /** Takes the execution lease if free; it expires on its own if the holder dies. */
  async acquireExecution(outputId: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.executionLeaseKey(outputId), owner, 'PX', ttlMs, 'NX')) === 'OK';
  }

  /** Extends a held execution lease; false when it is no longer ours (it ran out and was taken). */
  async renewExecution(outputId: string, owner: string, ttlMs: number): Promise<boolean> {
    return (
      (await renewLeaseScript.run(this.redis, [this.executionLeaseKey(outputId)], [owner, String(ttlMs)])) ===
      1
    );
  }

  async releaseExecution(outputId: string, owner: string): Promise<void> {
    await releaseLeaseScript.run(this.redis, [this.executionLeaseKey(outputId)], [owner]);
  }

  // ---- orchestrator support ----

  /** Ids of the artefacts that list `artefactId` among their sources (the outputs of its claims). */
  async childrenOf(artefactId: string): Promise<string[]> {
    return this.redis.smembers(this.k.children(artefactId));
  }

  /**
   * Adds artefacts written by someone else (Holt's own pups HSET directly) to our indexes, so the
   * reconcile loop and output lookups see them. Idempotent; keeps an existing index score.
   */
  async indexArtefacts(artefacts: Artefact[]): Promise<void> {
    if (!artefacts.length) return;
    const p = this.redis.pipeline();
    for (const a of artefacts) {
      p.zadd(this.k.artefactIndex, 'NX', a.created_at_ms, a.id);
      for (const src of a.source_artefacts) p.sadd(this.k.children(src), a.id);
    }
    for (const [err] of (await p.exec()) ?? []) if (err) throw err;
  }

  /**
   * Finds artefacts missing from the artefact index (written by Holt's own tools: a plain HSET and a
   * PUBLISH, no index) with one SCAN over the artefact keys, and indexes them. For the orchestrator's
   * recovery, and for a tool (the CLI) that lists through the index and may run without an orchestrator.
   * Malformed hashes are reported, not thrown.
   */
  async indexMissingArtefacts(count = 1000): Promise<{ indexed: Artefact[]; malformed: string[] }> {
    const prefix = this.k.artefact('');
    const indexed: Artefact[] = [];
    const malformed: string[] = [];
    const done = new Set<string>(); // SCAN may return a key twice
    let cursor = '0';
    do {
      const [next, found] = await this.redis.scan(
        cursor,
        'MATCH',
        `${prefix}*`,
        'COUNT',
        count,
        'TYPE',
        'hash',
      );
      cursor = next;
      const ids = found.map((key) => key.slice(prefix.length)).filter((id) => id && !done.has(id));
      for (const id of ids) done.add(id);
      const scores = await this.pipelined(
        ids,
        (p, id) => p.zscore(this.k.artefactIndex, id),
        (v) => v,
      );
      const missing = ids.filter((_, i) => scores[i] === null || scores[i] === undefined);
      const hashes = await this.pipelined(
        missing,
        (p, id) => p.hgetall(this.k.artefact(id)),
        (v) => (v ?? {}) as Record<string, string>,
      );
      const batch: Artefact[] = [];
      missing.forEach((id, i) => {
        const h = hashes[i] ?? {};
        if (!Object.keys(h).length) return; // deleted since the SCAN
        const a = artefactOf(this.#sink, id, h);
        if (a) batch.push(a);
        else malformed.push(id);
      });
      await this.indexArtefacts(batch);
      indexed.push(...batch);
    } while (cursor !== '0');
    return { indexed, malformed };
  }

  /** Artefact ids with their index score (created_at_ms) at or after `sinceMs`. */
  async artefactIdsSince(sinceMs: number): Promise<{ id: string; ms: number }[]> {
    const flatRes = await this.redis.zrangebyscore(this.k.artefactIndex, sinceMs, '+inf', 'WITHSCORES');
    const out: { id: string; ms: number }[] = [];
    for (let i = 0; i + 1 < flatRes.length; i += 2) out.push({ id: flatRes[i]!, ms: Number(flatRes[i + 1]) });
    return out;
  }

  /** claim_by_artefact for many artefacts in one round trip. */
  async claimIdsForArtefacts(artefactIds: string[]): Promise<(string | null)[]> {
    if (!artefactIds.length) return [];
    return this.redis.mget(artefactIds.map((id) => this.k.claimByArtefact(id)));
  }

  /** The compare-and-set revision of each claim (null when missing), one round trip. */
  async claimRevs(ids: string[]): Promise<(number | null)[]> {
    return this.pipelined(
      ids,
      (p, id) => p.hget(this.k.claim(id), 'rev'),
      (v) => (v === null || v === undefined ? null : Number(v)),
    );
  }

  /** Holt's paused grants (M3.5): role -> claim ids, oldest first. */
  async grantQueues(): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    const prefix = this.k.grantQueue('');
    let cursor = '0';
    do {
      const [next, found] = await this.redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', '500');
      cursor = next;
      for (const key of found) out.set(key.slice(prefix.length), await this.redis.zrange(key, '0', '-1'));
    } while (cursor !== '0');
    return out;
  }

  async removeFromGrantQueue(role: string, claimId: string): Promise<void> {
    await this.redis.zrem(this.k.grantQueue(role), claimId);
  }

  // ---- instance lease ----

  /** Takes or renews the single-orchestrator lease. Holt's lock value format is kept for its tools. */
  async acquireLock(holder: string, ttlMs: number): Promise<boolean> {
    const value = `orchestrator:${Math.floor(Date.now() / 1000)}`;
    const res = await acquireLockScript.run(
      this.redis,
      [this.k.lock, `${this.k.lock}:holder`],
      [holder, ttlMs, value],
    );
    return res === 1;
  }

  async releaseLock(holder: string): Promise<void> {
    await releaseLockScript.run(this.redis, [this.k.lock, `${this.k.lock}:holder`], [holder]);
  }

  async lockHolder(): Promise<string | null> {
    return this.redis.get(`${this.k.lock}:holder`);
  }

  // ---- agent registry ----

  async setAgents(agents: AgentRegistration[]): Promise<number> {
    const args = agents.flatMap((a) => [a.role, JSON.stringify(AgentRegistration.parse(a))]);
    return (await setAgentsScript.run(
      this.redis,
      [this.k.agents, this.k.agentsRevision, this.k.channels.agentsChanged, this.k.agentImages],
      args,
    )) as number;
  }

  /** The registry and its revision, read atomically. Malformed entries are reported, not dropped silently. */
  async getAgents(): Promise<{ rev: number; agents: AgentRegistration[]; invalid: string[] }> {
    const res = await this.redis.multi().hgetall(this.k.agents).get(this.k.agentsRevision).exec();
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

  /**
   * One pipelined round trip over `items`: `add` queues one command per item, `decode` turns its reply
   * (undefined if Redis sent none) into a value. The first command error is thrown.
   */
  private async pipelined<T>(
    items: readonly string[],
    add: (p: ChainableCommander, item: string) => void,
    decode: (reply: unknown, item: string) => T,
  ): Promise<T[]> {
    if (!items.length) return [];
    const p = this.redis.pipeline();
    for (const item of items) add(p, item);
    const res = (await p.exec()) ?? [];
    return items.map((item, i) => {
      const [err, v] = res[i] ?? [null, undefined];
      if (err) throw err;
      return decode(v, item);
    });
  }
}
