import { type ChainableCommander, Redis, type RedisOptions } from 'ioredis';
import { carrierOf } from '../telemetry/carrier.ts';
import { artefactToHash, type BlackboardDataError, claimToHash, claimToJson } from './codec.ts';
import { goEscape, goMapJson, sortedKeys } from './go-json.ts';
import { type Keys, keys } from './keys.ts';
import { artefactOf, claimOf, flat, type MalformedSink, type VersionedClaim } from './replies.ts';
import { createArtefactScript, createClaimScript } from './scripts.ts';
import {
  Artefact,
  type BidType,
  type Claim,
  type ClaimType,
  type GrantNotification,
  HOLT_WORKFLOW_EVENTS,
  type WorkflowEvent,
} from './types.ts';

/** A pub/sub message, ready to send. */
export interface Publication {
  channel: string;
  message: string;
}

export type NewArtefact = Omit<Artefact, 'created_at_ms'> & { created_at_ms?: number };

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
 * Typed access to one instance's blackboard: Holt's data model (artefacts, claims, bids, and the
 * notifications that announce them). Every write that must not race is one Lua script (write-once
 * artefacts, idempotent claim creation). What one kind of client does beyond that lives beside it, as
 * functions over a Blackboard: the orchestrator's step reads and compare-and-set writes
 * (claim-engine.ts), a pup's reads (pup-reads.ts) and execution lease (execution-lease.ts), the
 * instance lease (instance-lease.ts), the agent registry (registry.ts), quarantine (quarantine.ts),
 * worker exits (worker-exits.ts).
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
  /** Where this blackboard's reads report a stored item that does not parse. */
  readonly onMalformed: MalformedSink;
  readonly maxPayloadBytes: number;

  constructor(redis: Redis, instance: string, opts: BlackboardOptions = {}) {
    this.redis = redis;
    this.instance = instance;
    this.k = keys(instance);
    this.maxPayloadBytes = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    this.onMalformed =
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
    // Filled in if missing: the artefact carries the span that wrote it, so the claim on it and the
    // work on that claim continue the same trace.
    const carrier = input.traceparent ? undefined : carrierOf();
    const artefact = Artefact.parse({
      ...input,
      ...carrier,
      created_at_ms: input.created_at_ms || Date.now(),
    });
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
    return Object.keys(h).length ? artefactOf(this.onMalformed, id, h) : null;
  }

  /** One pipelined round trip; null for a missing id. */
  async getArtefacts(ids: string[]): Promise<(Artefact | null)[]> {
    return this.pipelined(
      ids,
      (p, id) => p.hgetall(this.k.artefact(id)),
      (v, id) => {
        const hash = (v ?? {}) as Record<string, string>;
        return Object.keys(hash).length ? artefactOf(this.onMalformed, id, hash) : null;
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

  /** Whether each artefact id exists (one pipelined round trip). */
  async artefactsExist(ids: string[]): Promise<boolean[]> {
    return this.pipelined(
      ids,
      (p, id) => p.exists(this.k.artefact(id)),
      (v) => v === 1,
    );
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

  async getClaim(id: string): Promise<VersionedClaim | null> {
    const h = await this.redis.hgetall(this.k.claim(id));
    if (!Object.keys(h).length) return null;
    return claimOf(this.onMalformed, id, h);
  }

  async getClaims(ids: string[]): Promise<(VersionedClaim | null)[]> {
    return this.pipelined(
      ids,
      (p, id) => p.hgetall(this.k.claim(id)),
      (v, id) => {
        const hash = (v ?? {}) as Record<string, string>;
        return Object.keys(hash).length ? claimOf(this.onMalformed, id, hash) : null;
      },
    );
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

  /**
   * One pipelined round trip over `items`: `add` queues one command per item, `decode` turns its reply
   * (undefined if Redis sent none) into a value. The first command error is thrown. (For this folder's
   * modules, which read through the same connection.)
   */
  async pipelined<T>(
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
