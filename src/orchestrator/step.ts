import DataLoader from 'dataloader';
import { LRUCache } from 'lru-cache';
import type { ClaimSnapshot, ClaimUpdate, SnapshotRequest, SourceRead } from '../blackboard/claim-engine.ts';
import {
  childrenOf,
  claimSnapshots,
  removeFromGrantQueue,
  updateClaims,
} from '../blackboard/claim-engine.ts';
import type { Blackboard, Publication } from '../blackboard/client.ts';
import type { VersionedClaim } from '../blackboard/replies.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import { foreignOutputs } from './authorship.ts';
import { BidWindows } from './bid-windows.ts';
import { BidWatch } from './bids.ts';
import type { StepOutcome } from './claim-runner.ts';
import { DEFAULTS, MAX_BID_TIMEOUT_FACTOR } from './config.ts';
import { type Decision, decide, type Effect, type LogLine, type Policy } from './decide.ts';
import type { Grant, GrantDispatcher } from './dispatch.ts';
import { LateBids } from './late-bids.ts';
import type { OrchestratorMetrics } from './metrics.ts';
import type { Quarantine } from './quarantine.ts';
import { tracedStep } from './step-trace.ts';

/** Called at every step boundary; tests inject crashes here. */
export type StepHook = (name: string, claimId: string) => void | Promise<void>;

/** Writes one step may chain on what it just wrote before handing the claim back to the runner. */
const MAX_INLINE_WRITES = 4;

/** No caching (every load is a fresh read or write); batches bounded so one script stays short. */
const BATCHING = { cache: false, maxBatchSize: 100 } as const;

/** Claims whose last state and target a stepper keeps (the least recently stepped go first). */
const CACHED_CLAIMS = 10_000;

/** Roughly what an artefact costs in memory (UTF-16 strings, ids, object overhead). */
export function artefactBytes(a: Artefact): number {
  return (
    512 + 2 * (a.payload.length + a.type.length + a.produced_by_role.length) + 80 * a.source_artefacts.length
  );
}

export class NotLeaderError extends Error {
  constructor() {
    super('this orchestrator no longer holds the instance lease');
    this.name = 'NotLeaderError';
  }
}

export interface StepDeps {
  bb: Blackboard;
  policy: Policy;
  bidPollMs: number;
  /** Bound on the cached targets' memory (payloads included); a larger target is simply re-read. */
  targetCacheBytes?: number;
  dispatcher: GrantDispatcher;
  log: Logger;
  metrics: OrchestratorMetrics;
  registered: () => ReadonlySet<string>;
  /** role → image digest, from the registry (the audit on grants). */
  images?: () => ReadonlyMap<string, string>;
  /** False once the lease is lost or the term halted: no write may start after that. */
  alive: () => boolean;
  kick: (claimId: string) => void;
  quarantine: Quarantine;
  onStep?: StepHook;
}

function grantOf(e: Extract<Effect, { kind: 'grant' }>, claim: Claim): Grant {
  return { claim: e.claim ?? claim, role: e.role, claimType: e.claimType, phase: e.phase, reason: e.reason };
}

export function emit(log: Logger, line: LogLine): void {
  const level = line.level ?? 'info';
  // Most lines of a busy claim are debug: skip copying them when nobody logs at that level.
  if (!log.isLevelEnabled(level)) return;
  const { level: _, event_type, ...rest } = line;
  log[level]({ event_type, ...rest }, event_type);
}

/**
 * One step of one claim: read a snapshot, decide, then apply the decision with a single
 * compare-and-set. Durable side effects (Failure artefacts, feedback claims) go before the CAS with
 * derived ids; announcements go after it, so a grant is always on the claim before anyone hears of it.
 */
export class ClaimStepper {
  private readonly deps: StepDeps;
  private readonly firstSeen = new Map<string, number>();
  /** The rev at which a claim last settled with nothing timed to do (the reconcile loop skips it). */
  readonly idleRev = new Map<string, number | null>();
  /** The target artefact of recently stepped claims (artefacts are write-once: read it once, not per step). */
  private readonly targets: LRUCache<string, Artefact>;
  /** Recently stepped claims as last read or written: a step re-reads one only when its rev moved. */
  private readonly claims = new LRUCache<string, VersionedClaim>({ max: CACHED_CLAIMS });
  /** Claims seen past consensus (they never collect bids again: their steps skip reading bids). */
  private readonly pastBids = new Set<string>();
  /** Bid events between steps: when a claim collecting bids steps again. */
  readonly bids: BidWatch;
  /** The bidders each consensus closed without: their bids, when they come, are reported as late. */
  readonly late = new LateBids();
  /** Each bidder's bid window, as its measured latency widened it (memory only: one term's). */
  readonly windows: BidWindows;
  /** Dormant claims that a silent agent's bid would re-open (`decide`'s revive). */
  readonly revivable = new LRUCache<string, true>({ max: CACHED_CLAIMS });
  /** Claims just created here: their first step decides on what was written, without reading it back. */
  private readonly fresh = new Set<string>();
  /** What the next step of a claim would read, already read with an output's arrival (see `sourceRead`). */
  private readonly readAhead = new Map<string, ClaimSnapshot>();

  constructor(deps: StepDeps) {
    this.deps = deps;
    this.bids = new BidWatch(deps.bidPollMs);
    const base = deps.policy.bidTimeoutMs;
    this.windows = new BidWindows({
      baseMs: base,
      maxMs: deps.policy.maxBidTimeoutMs ?? MAX_BID_TIMEOUT_FACTOR * base,
    });
    this.targets = new LRUCache<string, Artefact>({
      max: CACHED_CLAIMS,
      maxSize: deps.targetCacheBytes ?? DEFAULTS.targetCacheBytes,
      sizeCalculation: artefactBytes,
    });
  }

  /**
   * The reads and the writes of the steps that run in one turn of the event loop go out as one
   * script call each (DataLoader's batching): under load, a burst of claims costs one round trip,
   * not one per claim. Each claim's compare-and-set still succeeds or fails on its own.
   */
  private readonly snapshots = new DataLoader<SnapshotRequest, ClaimSnapshot | null>(
    (reqs) => claimSnapshots(this.deps.bb, [...reqs]),
    BATCHING,
  );
  private readonly updates = new DataLoader<ClaimUpdate, number | null>(
    (reqs) => updateClaims(this.deps.bb, [...reqs]),
    BATCHING,
  );

  /**
   * A step boundary: the test hook runs (and may crash the step), then a lost lease stops the step.
   * Synchronous when there is no hook (the production path pays no extra turn per boundary).
   */
  private hook(name: string, claimId: string): Promise<void> | undefined {
    const hooked = this.deps.onStep?.(name, claimId);
    if (hooked) return hooked.then(() => this.checkAlive());
    this.checkAlive();
    return undefined;
  }

  private checkAlive(): void {
    if (!this.deps.alive()) throw new NotLeaderError();
  }

  /** Outputs of a claim: the target's children plus anything its phase state already received. */
  async outputs(c: Claim): Promise<Artefact[]> {
    const ids = await childrenOf(this.deps.bb, c.artefact_id);
    const children = new Map<string, Artefact>();
    for (const [i, a] of (await this.deps.bb.getArtefacts(ids)).entries())
      if (a) children.set(ids[i] as string, a);
    return this.outputsOf(c, children);
  }

  /** What the cached targets take in memory (by `artefactBytes`). */
  cachedTargetBytes(): number {
    return this.targets.calculatedSize;
  }

  /** A claim just created (at rev 1) for `target`: its first step needs no read. */
  noteCreated(claim: Claim, target: Artefact): void {
    this.claims.set(claim.id, { claim, rev: 1 });
    this.targets.set(claim.id, target);
    this.fresh.add(claim.id);
  }

  /**
   * An output of claim `id` arrived, and its script read what the claim's next step would: that step
   * uses it instead of reading, when it matches the claim this stepper knows (same rev, so the same
   * claim; same target) and the claim no longer collects bids (the read has none).
   */
  sourceRead(id: string, read: SourceRead): void {
    const vc = this.claims.get(id);
    const target = this.targets.get(id);
    if (!vc || vc.rev !== read.rev || !target || target.id !== vc.claim.artefact_id || !this.pastBids.has(id))
      return;
    // Replies can be handled out of the order their scripts ran in: two reads of the same claim state
    // are merged (children are write-once, so the union is what the later script saw, or more).
    const had = this.readAhead.get(id);
    const children = had?.vc === vc ? new Map([...had.children, ...read.children]) : read.children;
    this.readAhead.set(id, { vc, bids: {}, target, children });
  }

  step = async (id: string): Promise<StepOutcome> => {
    const { bb, metrics } = this.deps;
    const known = this.targets.get(id);
    // Bids matter only while a claim collects them, and a claim never collects again once past that.
    const wantBids = !this.pastBids.has(id);
    // A claim we just created has no bids or outputs yet but those announced since: decide on the
    // claim as written (the bids announced so far count as heard during this step).
    const created = this.fresh.delete(id) ? this.claims.get(id) : undefined;
    this.bids.stepStarted(id, created !== undefined);
    // Read ahead for this claim, if still of the claim as known here (a write since moved its rev).
    const ahead = this.readAhead.get(id);
    this.readAhead.delete(id);
    const snap: ClaimSnapshot | null = created
      ? { vc: created, bids: {}, target: null, children: new Map() }
      : ahead && ahead.vc === this.claims.get(id)
        ? ahead
        : await this.snapshots.load({ id, bids: wantBids, target: !known, known: this.claims.get(id) });
    if (!snap) {
      this.idleRev.set(id, null);
      return {};
    }
    let vc = snap.vc;
    this.claims.set(id, vc);
    const c = vc.claim;
    metrics.claimStatus(id, c.status, c.status);
    if (c.status === 'complete' || c.status === 'terminated') {
      this.forget(id);
      return {};
    }
    if (c.dormant_reason && !c.silent_agents?.length) {
      this.idleRev.set(id, vc.rev);
      this.stoppedBidding(id);
      this.revivable.delete(id);
      return {};
    }
    // Dormant for want of bids: a bid from a silent agent re-opens it (decide), so its bids are
    // watched: their events kick it, and reconcile passes re-check it should an event be lost.
    if (c.dormant_reason) this.revivable.set(id, true);
    else this.revivable.delete(id);
    const collecting = !c.phase_state && c.status === 'pending_review' && !c.grant_queue;
    if (!collecting) this.pastConsensus(id);
    const bids = collecting && !wantBids ? await bb.getBids(id) : snap.bids;
    if (collecting && !this.firstSeen.has(id)) this.firstSeen.set(id, Date.now());
    const target = known
      ? known.id === c.artefact_id
        ? known
        : await bb.getArtefact(c.artefact_id)
      : snap.target;
    if (target) this.targets.set(id, target);
    const outputs = await this.outputsOf(c, snap.children);
    await this.quarantineForeign(c, outputs);
    // After a write, decide again on what was just written (with the same outputs and bids) instead
    // of reading it back: anything that changed since (an output, a bid) kicks the claim once more.
    for (let inline = 0; ; inline++) {
      const now = Date.now();
      const decision = decide({
        claim: vc.claim,
        target,
        bids,
        outputs,
        registered: this.deps.registered(),
        images: this.deps.images?.(),
        firstSeenMs: this.firstSeen.get(id) ?? now,
        now,
        policy: this.deps.policy,
        bidWindows: this.windows.windows,
      });
      switch (decision.kind) {
        case 'done':
          this.forget(id);
          return {};
        case 'idle':
          this.idleRev.set(id, vc.rev);
          return {};
        case 'wait': {
          const next = this.bids.waited(id, Object.keys(bids).length, decision.missing);
          if (next.again) return { again: true };
          if (next.newBids)
            this.deps.log.debug(
              { event_type: 'bid_received', claim_id: id, waiting_for: decision.missing },
              'bid_received',
            );
          return { wakeAt: Math.min(now + next.pollMs, decision.untilMs) };
        }
        case 'write': {
          const rev = await this.apply(vc, decision, target);
          // A conflict (someone moved it): re-read and decide again. A claim that keeps writing goes
          // back to the runner, which bounds its steps.
          if (rev === null) {
            this.claims.delete(id);
            return { again: true };
          }
          vc = { claim: decision.claim, rev };
          this.claims.set(id, vc);
          if (decision.claim.silent_agents?.length) this.revivable.set(id, true);
          else this.revivable.delete(id);
          if (decision.claim.dormant_reason) this.stoppedBidding(id);
          else if (decision.claim.phase_state || decision.claim.status !== 'pending_review')
            this.pastConsensus(id);
          if (inline >= MAX_INLINE_WRITES) return { again: true };
        }
      }
    }
  };

  /** Outputs by roles the claim never granted: set aside (decide ignores them) and reported once. */
  private async quarantineForeign(c: Claim, outputs: Artefact[]): Promise<void> {
    for (const a of foreignOutputs(c, outputs))
      await this.deps.quarantine.add({
        kind: 'artefact',
        id: a.id,
        claim_id: c.id,
        produced_by_role: a.produced_by_role,
        reason: 'author_not_granted',
      });
  }

  /** The outputs of `c` from the children a snapshot read, plus received ids missing from them. */
  private async outputsOf(c: Claim, children: ReadonlyMap<string, Artefact>): Promise<Artefact[]> {
    const found: Artefact[] = [];
    for (const a of children.values()) if (a.source_artefacts.includes(c.artefact_id)) found.push(a);
    const extra = Object.values(c.phase_state?.received ?? {}).filter(
      (rid): rid is string => !!rid && !children.has(rid),
    );
    if (extra.length) {
      for (const a of await this.deps.bb.getArtefacts([...new Set(extra)]))
        if (a?.source_artefacts.includes(c.artefact_id)) found.push(a);
    }
    return found.sort(
      (a, b) => a.created_at_ms - b.created_at_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
  }

  /** Applies a write decision, in its span of the claim's trace (step-trace.ts). */
  private apply(
    vc: VersionedClaim,
    d: Extract<Decision, { kind: 'write' }>,
    target: Artefact | null,
  ): Promise<number | null> {
    return tracedStep(vc.claim, d, () => this.write(vc, d, target));
  }

  /** Applies a write decision; the claim's new rev, or null when the compare-and-set lost. */
  private async write(
    vc: VersionedClaim,
    d: Extract<Decision, { kind: 'write' }>,
    target: Artefact | null,
  ): Promise<number | null> {
    const id = vc.claim.id;
    await this.hook('before_effects', id);
    for (const e of d.before) {
      await this.run(e, d.claim);
      await this.hook(`after_${e.kind}`, id);
    }
    await this.hook('before_cas', id);
    // Announcements that are plain messages go out inside the compare-and-set; the rest follow it.
    const inline = new Map<Effect, Publication[]>();
    for (const e of d.after) {
      const p = this.publications(e, d.claim);
      if (p) inline.set(e, p);
    }
    const rev = await this.updates.load({
      claim: d.claim,
      rev: vc.rev,
      announce: [...inline.values()].flat(),
      previous: vc.claim,
    });
    if (rev === null) return null;
    this.idleRev.delete(id);
    for (const line of d.logs) emit(this.deps.log, line);
    this.observe(vc.claim, d, target);
    await this.hook('after_cas', id);
    for (const e of d.after) {
      if (!inline.has(e)) await this.run(e, d.claim);
      else if (e.kind === 'grant') this.granted(e, e.claim ?? d.claim);
      await this.hook(`after_${e.kind}`, id);
    }
    return rev;
  }

  /** An effect as messages to publish with the claim's write, or null when it must run after it. */
  private publications(e: Effect, claim: Claim): Publication[] | null {
    if (e.kind === 'event') return [this.deps.bb.workflowEventPublication(e.event)];
    if (e.kind !== 'grant') return null;
    return this.deps.dispatcher.publications?.(grantOf(e, claim)) ?? null;
  }

  private granted(e: Extract<Effect, { kind: 'grant' }>, grantClaim: Claim): void {
    this.deps.metrics.grants.inc({ claim_type: e.claimType, reason: e.reason });
    emit(this.deps.log, {
      event_type: 'grant_notification_published',
      level: 'debug',
      claim_id: grantClaim.id,
      agent_name: e.role,
      claim_type: e.claimType,
    });
  }

  private async run(e: Effect, claim: Claim): Promise<void> {
    if (!this.deps.alive()) throw new NotLeaderError();
    const { bb } = this.deps;
    switch (e.kind) {
      case 'artefact':
        await bb.createArtefact(e.artefact);
        return;
      case 'feedback_claim':
        // Derived id: after a crash the same claim is found and not created (or re-indexed) again.
        if (!(await bb.getClaim(e.claim.id))) await bb.createClaim(e.claim, { overwriteIndex: true });
        this.deps.kick(e.claim.id);
        return;
      case 'grant':
        await this.deps.dispatcher.dispatch(grantOf(e, claim));
        this.granted(e, e.claim ?? claim);
        return;
      case 'event':
        await bb.publishWorkflowEvent(e.event);
        return;
      case 'dequeue':
        await removeFromGrantQueue(bb, e.role, claim.id);
        return;
    }
  }

  private observe(before: Claim, d: Extract<Decision, { kind: 'write' }>, target: Artefact | null): void {
    const { metrics } = this.deps;
    metrics.claimStatus(d.claim.id, d.claim.status, before.status);
    for (const t of d.timings) {
      if (t.metric === 'bid_latency') {
        metrics.bidLatency.observe(t.ms / 1000);
        for (const e of d.after) {
          if (e.kind !== 'event' || e.event.event !== 'bid_timeout') continue;
          metrics.bidTimeouts.inc();
          const { silent_agents, timeout_ms } = e.event.data;
          const start = Date.now() - t.ms;
          this.late.closedWithout(d.claim.id, silent_agents, start + timeout_ms, start);
        }
        if (target && d.after.some((e) => e.kind === 'grant')) {
          metrics.grantLatency.observe(Math.max(0, Date.now() - target.created_at_ms) / 1000);
        }
      } else metrics.phaseDuration.observe({ phase: t.phase }, t.ms / 1000);
    }
  }

  /**
   * A bid event: a bid after its consensus closed without it widens its bidder's window (and is
   * returned, to be reported); a bid from an expected bidder of a claim still collecting adapts it.
   */
  bidHeard(id: string, role: string | undefined, now: number): { lateByMs: number } | null {
    if (role === undefined) return null;
    const late = this.late.heard(id, role, now);
    if (late) {
      this.windows.late(role, late.latencyMs);
      return late;
    }
    const c = this.claims.get(id)?.claim;
    if (!c || this.pastBids.has(id) || c.phase_state || c.dormant_reason || c.status !== 'pending_review')
      return null;
    if (!(c.expected_bidders ?? [...this.deps.registered()]).includes(role)) return null;
    const start = c.bids_reopened_at_ms ?? c.created_at_ms ?? this.firstSeen.get(id);
    if (start !== undefined) this.windows.onTime(role, now - start);
    return null;
  }

  /** The claim collects no more bids: drop what only consensus needed. */
  private stoppedBidding(id: string): void {
    this.firstSeen.delete(id);
    this.bids.forget(id);
  }

  /** Past consensus (it never collects bids again, so its steps skip reading them). */
  private pastConsensus(id: string): void {
    if (this.pastBids.has(id)) return;
    this.pastBids.add(id);
    this.stoppedBidding(id);
  }

  forget(id: string): void {
    this.revivable.delete(id);
    this.firstSeen.delete(id);
    this.idleRev.delete(id);
    this.targets.delete(id);
    this.claims.delete(id);
    this.pastBids.delete(id);
    this.fresh.delete(id);
    this.readAhead.delete(id);
    this.bids.forget(id);
    this.deps.metrics.forget(id);
  }
}
