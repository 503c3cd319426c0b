import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  artefactArrived,
  artefactIdsSince,
  claimIdsForArtefacts,
  claimRevs,
} from '../blackboard/claim-engine.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { getAgents } from '../blackboard/registry.ts';
import { type Subscription, subscribe } from '../blackboard/subscriber.ts';
import { type AgentRegistration, Artefact, type Claim, takesClaim } from '../blackboard/types.ts';
import { errorMessage } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import { traceFieldsOf } from '../telemetry/carrier.ts';
import { ClaimRunner } from './claim-runner.ts';
import type { OrchestratorConfig } from './config.ts';
import type { GrantDispatcher } from './dispatch.ts';
import { reportLateBid } from './late-bid-report.ts';
import { publishLoad } from './load.ts';
import type { OrchestratorMetrics } from './metrics.ts';
import { sortRoles } from './phases.ts';
import type { Quarantine } from './quarantine.ts';
import { type RecoveryDeps, recoverTerm, redispatchDue } from './recovery.ts';
import { RedisServerWatch } from './redis-server.ts';
import { ClaimStepper, NotLeaderError, type StepHook } from './step.ts';

const BATCH = 500;
/** The window every reconcile pass re-reads, at least (ms): lost events of just-written artefacts. */
const SHORT_LOOKBACK_MS = 5_000;

/**
 * A bid_submitted workflow event: its claim id and (if given) bidder; null for anything else. A plain
 * check, not a schema: every bid of every claim comes through here.
 */
function bidSubmitted(
  msg: unknown,
): { claimId: string; role: string | undefined; bidType: string | undefined } | null {
  const m = msg as {
    event?: unknown;
    data?: { claim_id?: unknown; agent_name?: unknown; bid_type?: unknown };
  } | null;
  if (typeof m !== 'object' || m === null || m.event !== 'bid_submitted') return null;
  const data = m.data;
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return null;
  if (typeof data.claim_id !== 'string') return null;
  if (data.agent_name !== undefined && typeof data.agent_name !== 'string') return null;
  const bidType = typeof data.bid_type === 'string' ? data.bid_type : undefined;
  return { claimId: data.claim_id, role: data.agent_name, bidType };
}

export interface LeaderTermDeps {
  bb: Blackboard;
  config: OrchestratorConfig;
  log: Logger;
  metrics: OrchestratorMetrics;
  dispatcher: GrantDispatcher;
  registry: Map<string, AgentRegistration>;
  quarantine: Quarantine;
  leaseValid: () => boolean;
  onStep?: StepHook;
}

/**
 * One term of leadership: from taking the lease to losing it. Everything it knows is rebuilt from
 * Redis when it starts, so a new term (here or in another process) simply carries on.
 */
export class LeaderTerm {
  private readonly deps: LeaderTermDeps;
  private readonly runner: ClaimRunner;
  private readonly stepper: ClaimStepper;
  private sub: Subscription | null = null;
  private reconcileTimer: NodeJS.Timeout | null = null;
  private loadTimer: NodeJS.Timeout | null = null;
  private halted = false;
  /** stop() has begun: nothing new is scheduled, the steps in flight finish. */
  private closing = false;
  private registryRev = -1;
  /** The registered roles, as of the last registry load. */
  private registered: ReadonlySet<string> = new Set();
  /** role → image digest of the registered agents that have one. */
  private images: ReadonlyMap<string, string> = new Map();
  /** The same, in Holt's byte-wise order: every new claim's expected bidders. */
  private expectedBidders: readonly string[] = [];
  /** Artefacts already handled, by created_at_ms, within the reconcile look-back. */
  private readonly seen = new Map<string, number>();
  /** The first reconcile of a term reads every artefact; later ones only the look-back. */
  private caughtUp = false;
  /** Bumped when Redis is another server (it may have lost claims): `seen` from before means nothing. */
  private seenEpoch = 0;
  private readonly redisServer: RedisServerWatch;
  /** When a reconcile last re-read the whole look-back (ms). */
  private lastFullPass = 0;
  /** When the last reconcile pass began (ms). */
  private lastPassStart = 0;
  /** When each settled claim's grants are next checked for a re-announcement (ms). */
  private readonly nextRedispatch = new Map<string, number>();
  private reconciling: Promise<void> | null = null;

  constructor(deps: LeaderTermDeps) {
    this.deps = deps;
    this.stepper = new ClaimStepper({
      bb: deps.bb,
      policy: {
        bidTimeoutMs: deps.config.bidTimeoutMs,
        maxBidTimeoutMs: deps.config.maxBidTimeoutMs,
        maxReviewIterations: deps.config.maxReviewIterations,
      },
      bidPollMs: deps.config.bidPollMs,
      targetCacheBytes: deps.config.targetCacheBytes,
      dispatcher: deps.dispatcher,
      log: deps.log,
      metrics: deps.metrics,
      registered: () => this.registered,
      images: () => this.images,
      alive: () => this.alive(),
      kick: (id) => this.runner.kick(id),
      quarantine: deps.quarantine,
      onStep: deps.onStep,
    });
    this.runner = new ClaimRunner(this.stepper.step, (id, e) => this.failed(e, { claim_id: id }));
    this.redisServer = new RedisServerWatch(deps.bb.redis);
  }

  alive(): boolean {
    return !this.halted && this.deps.leaseValid();
  }

  private failed(e: unknown, ctx: Record<string, unknown>): void {
    if (e instanceof NotLeaderError || this.halted) return;
    this.deps.log.error({ event_type: 'error', ...ctx, error: errorMessage(e) }, 'error');
  }

  async start(): Promise<void> {
    const { bb, config } = this.deps;
    const k = bb.k.channels;
    // The registry first: a claim made for an event heard right after subscribing must know its
    // bidders. (It is loaded again below, in case it changed while we subscribed.)
    await this.loadRegistry();
    await this.redisServer.remember();
    // Subscribe before recovering, so nothing published during recovery is missed (Holt's order lost it).
    const sub = await subscribe(
      config.redisUrl,
      [k.artefactEvents, k.workflowEvents, k.agentsChanged],
      z.unknown(),
      (msg, channel) => this.onMessage(msg, channel),
      (channel, raw, error) =>
        this.deps.log.warn(
          { event_type: 'invalid_message', channel, raw: raw.slice(0, 200), error: error.message },
          'invalid_message',
        ),
      {
        onResubscribed: () => this.onResubscribed(),
        // Of the workflow events only bids matter here (most are our own, echoed back).
        accept: (channel, raw) => channel !== k.workflowEvents || raw.includes('"bid_submitted"'),
      },
    );
    this.sub = sub;
    // halt() or stop() may have run while subscribing, when there was nothing yet for them to close.
    if (this.halted || this.closing) {
      await sub.close();
      throw new NotLeaderError();
    }
    await this.loadRegistry();
    await this.recover();
    await this.reconcile();
    this.scheduleReconcile();
    this.scheduleLoad(0);
  }

  /** Stops at once (the lease is gone or the process is crashing): nothing new is written. */
  halt(): void {
    this.halted = true;
    if (this.reconcileTimer) clearTimeout(this.reconcileTimer);
    if (this.loadTimer) clearTimeout(this.loadTimer);
    void this.runner.stop(false);
    void this.sub?.close();
  }

  /** Graceful end: stop scheduling and let the steps in flight finish. */
  async stop(): Promise<void> {
    this.closing = true;
    if (this.reconcileTimer) clearTimeout(this.reconcileTimer);
    if (this.loadTimer) clearTimeout(this.loadTimer);
    await this.sub?.close();
    await this.runner.stop(true);
    await this.reconciling;
    this.halted = true;
  }

  private onMessage(msg: unknown, channel: string): void {
    if (this.halted) return;
    const k = this.deps.bb.k.channels;
    if (channel === k.artefactEvents) {
      const a = Artefact.safeParse(msg);
      if (!a.success) {
        this.deps.log.warn(
          { event_type: 'invalid_message', channel, error: a.error.message },
          'invalid_message',
        );
        return;
      }
      this.onArtefact(a.data).catch((e: unknown) => this.failed(e, { artefact_id: a.data.id }));
    } else if (channel === k.workflowEvents) {
      const b = bidSubmitted(msg);
      // A new bid only matters to a claim still collecting bids, and to one waiting on its poll timer
      // only once its last missing bidder is in (the timer still polls, should an event be lost).
      // A bid heard during a step is checked by that step against what it read.
      if (!b) return;
      const late = this.stepper.bidHeard(b.claimId, b.role, Date.now());
      if (late && b.role !== undefined)
        reportLateBid(this.deps, { ...b, role: b.role, lateByMs: late.lateByMs });
      // A dormant claim closed without this bidder: its bid may re-open it.
      if (this.stepper.revivable.has(b.claimId)) {
        this.runner.kick(b.claimId);
        return;
      }
      if (!this.runner.busy(b.claimId)) {
        this.stepper.bids.beforeStep(b.claimId, b.role);
        return;
      }
      if (this.runner.stepping(b.claimId)) {
        if (!this.stepper.bids.duringStep(b.claimId, b.role)) this.runner.kick(b.claimId);
      } else if (this.stepper.bids.arrived(b.claimId, b.role)) this.runner.kick(b.claimId);
    } else if (channel === k.agentsChanged) {
      this.loadRegistry().catch((e: unknown) => this.failed(e, { during: 'registry_reload' }));
    }
  }

  /**
   * The event connection came back: bids, outputs and artefacts published while it was down were
   * never heard. Every claim waiting on a timer or stepping (its read may predate the gap) steps
   * again, and a reconcile picks up the artefacts.
   */
  private onResubscribed(): void {
    if (this.halted || this.closing) return;
    this.deps.log.warn({ event_type: 'events_resubscribed' }, 'events_resubscribed');
    // The connection may have been down for longer than a short pass looks back.
    this.lastFullPass = 0;
    this.runner.kickAll();
    // Redis restarted (from an older snapshot, say) or failed over: an artefact seen with its claim
    // may be back without it, so the next pass reads every artefact again, as a term's first does.
    const forget = async () => {
      if (!(await this.redisServer.changed())) return;
      this.deps.log.warn({ event_type: 'redis_server_changed' }, 'redis_server_changed');
      this.seenEpoch++;
      this.seen.clear();
      this.caughtUp = false;
    };
    void forget().finally(() => this.reconcileOnce());
  }

  /** One reconcile at a time: a pass already running covers the caller too. */
  private reconcileOnce(): Promise<void> {
    this.reconciling ??= this.reconcile()
      .catch((e: unknown) => this.failed(e, { during: 'reconcile' }))
      .finally(() => {
        this.reconciling = null;
      });
    return this.reconciling;
  }

  private async loadRegistry(): Promise<void> {
    const { rev, agents, invalid } = await getAgents(this.deps.bb);
    if (rev === this.registryRev) return;
    this.registryRev = rev;
    this.deps.registry.clear();
    for (const a of agents) this.deps.registry.set(a.role, a);
    this.registered = new Set(this.deps.registry.keys());
    this.images = new Map(agents.flatMap((a) => (a.image_id ? [[a.role, a.image_id] as const] : [])));
    this.expectedBidders = sortRoles(this.registered);
    for (const role of invalid) {
      this.deps.log.warn({ event_type: 'invalid_agent_registration', role }, 'invalid_agent_registration');
    }
    this.deps.log.info(
      { event_type: 'registry_loaded', revision: rev, roles: [...this.deps.registry.keys()] },
      'registry_loaded',
    );
  }

  // ---- artefacts ----

  /** An artefact heard of live: index it, claim it, and step the claims it may be an output of. */
  private async onArtefact(a: Artefact): Promise<void> {
    const { bb, log } = this.deps;
    const epoch = this.seenEpoch;
    // Per-artefact lines are debug: at info a claim's life is claim_created, consensus, grants and
    // its end (a busy instance writes thousands of claims a second).
    log.debug(
      {
        event_type: 'artefact_received',
        artefact_id: a.id,
        type: a.type,
        structural_type: a.structural_type,
      },
      'artefact_received',
    );
    let claim: Claim | null = null;
    if (!takesClaim(a.structural_type))
      log.debug(
        { event_type: 'claim_creation_skipped', artefact_id: a.id, structural_type: a.structural_type },
        'claim_creation_skipped',
      );
    else claim = await this.newClaim(a);
    const r = await artefactArrived(bb, a, claim);
    if (claim && r.claimId) await this.claimWritten(a, claim, r.claimId, true);
    for (const [i, id] of r.sourceClaims.entries()) {
      if (!id) continue;
      const read = r.sourceReads[i];
      if (read) this.stepper.sourceRead(id, read);
      this.runner.kick(id);
    }
    // Only now: if anything above failed, the reconcile loop must still pick the artefact up.
    this.markSeen(a.id, a.created_at_ms, epoch);
  }

  /** The reconcile loop's path: a claim for an artefact whose event was missed. */
  private async ensureClaim(a: Artefact): Promise<void> {
    const claim = await this.newClaim(a);
    const r = await this.deps.bb.createClaim(claim);
    await this.claimWritten(a, claim, r.id, false);
  }

  /** A new claim for `a`, once the crash hook and the lease allow writing it. */
  private async newClaim(a: Artefact): Promise<Claim> {
    if (!this.alive()) throw new NotLeaderError();
    const claim: Claim = {
      id: randomUUID(),
      artefact_id: a.id,
      status: 'pending_review',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: '',
      // The bidders this claim's consensus waits for, fixed now even if the registry changes later.
      expected_bidders: [...this.expectedBidders],
      created_at_ms: Date.now(),
      // The work on the claim continues the trace of the artefact it claims.
      ...traceFieldsOf(a),
    };
    await this.deps.onStep?.('before_create_claim', claim.id);
    if (!this.alive()) throw new NotLeaderError();
    return claim;
  }

  /** After the claim write: `id` is `claim`'s own when it was created, else the artefact's existing claim. */
  private async claimWritten(a: Artefact, claim: Claim, id: string, live: boolean): Promise<void> {
    if (id === claim.id) {
      this.deps.log.info(
        {
          event_type: 'claim_created',
          claim_id: claim.id,
          artefact_id: a.id,
          latency_ms: (claim.created_at_ms ?? Date.now()) - a.created_at_ms,
        },
        'claim_created',
      );
      this.deps.metrics.claimStatus(claim.id, 'pending_review');
      this.stepper.noteCreated(claim, a);
      await this.deps.onStep?.('after_create_claim', claim.id);
    } else if (live) {
      this.deps.log.info(
        { event_type: 'duplicate_artefact', artefact_id: a.id, claim_id: id },
        'duplicate_artefact',
      );
    }
    this.runner.kick(id);
  }

  /** Unless Redis changed since `epoch`: then what was read may be gone, and is read again. */
  private markSeen(id: string, ms: number, epoch: number): void {
    if (epoch === this.seenEpoch) this.seen.set(id, ms);
  }

  // ---- recovery and reconcile ----

  private recover(): Promise<void> {
    return recoverTerm(this.recoveryDeps());
  }

  private scheduleReconcile(): void {
    if (this.halted || this.closing) return;
    this.reconcileTimer = setTimeout(() => {
      void this.reconcileOnce().finally(() => this.scheduleReconcile());
    }, this.deps.config.reconcileIntervalMs);
  }

  /** Publishes the roles' open grants now and then every loadIntervalMs, while this term lasts. */
  private scheduleLoad(delayMs: number): void {
    if (this.halted || this.closing) return;
    this.loadTimer = setTimeout(() => {
      publishLoad(this.deps.bb, () => this.alive())
        .catch((e: unknown) => this.failed(e, { during: 'publish_load' }))
        .finally(() => this.scheduleLoad(this.deps.config.loadIntervalMs));
    }, delayMs);
  }

  /**
   * Pub/sub is at-most-once: re-read recent artefacts and the active claims, so a lost message only
   * delays work by one interval, and re-announce grants that have waited too long for any output.
   */
  async reconcile(): Promise<void> {
    const { bb, config } = this.deps;
    this.stepper.bids.expireEarly();
    await this.loadRegistry();
    const active = new Set(await bb.activeClaimIds());

    // The look-back is on our own clock: a writer's created_at_ms (one stamped in the future, say)
    // must not move the window. The first pass of a term reads everything (the catch-up after downtime).
    // Later passes re-read a short window, and the whole look-back only every half look-back: an
    // artefact stamped by a slow clock is still caught, and a busy instance does not re-read a
    // minute of artefacts every second.
    const now = Date.now();
    const epoch = this.seenEpoch;
    const since = this.caughtUp ? now - config.artefactLookbackMs : 0;
    const full = !this.caughtUp || now - this.lastFullPass >= config.artefactLookbackMs / 2;
    // A short pass reaches back to before the previous pass began, however long that one took.
    const short = Math.min(now - SHORT_LOOKBACK_MS, this.lastPassStart - 3 * config.reconcileIntervalMs);
    const from = full ? since : Math.max(since, short);
    this.lastPassStart = now;
    const fresh = (await artefactIdsSince(bb, from)).filter((x) => !this.seen.has(x.id));
    for (let i = 0; i < fresh.length && this.alive(); i += BATCH) {
      const artefacts = (await bb.getArtefacts(fresh.slice(i, i + BATCH).map((x) => x.id))).filter(
        (a): a is Artefact => a !== null,
      );
      const claimable = artefacts.filter((a) => takesClaim(a.structural_type));
      const existing = await claimIdsForArtefacts(
        bb,
        claimable.map((a) => a.id),
      );
      for (const [j, a] of claimable.entries()) if (!existing[j]) await this.ensureClaim(a);
      const sources = [...new Set(artefacts.flatMap((a) => a.source_artefacts))];
      for (const id of await claimIdsForArtefacts(bb, sources))
        if (id && active.has(id)) this.runner.kick(id);
      for (const a of artefacts) this.markSeen(a.id, a.created_at_ms, epoch);
    }
    if (!this.alive()) return;
    if (epoch === this.seenEpoch) this.caughtUp = true;
    if (full) {
      this.lastFullPass = now;
      // Pruned on full passes only: a busy instance has a minute of artefacts in here.
      for (const [id, ms] of this.seen) if (ms < since) this.seen.delete(id);
    }

    // Claims that settled at a rev they still have need nothing; anything else gets a step. Only the
    // leader writes claims, so a settled claim's rev is checked on full passes and when its grants
    // are due for a re-announcement, not on every pass (a busy instance has thousands settled).
    const candidates = [...active].filter((id) => !this.runner.busy(id));
    const settled = candidates.filter((id) => this.stepper.idleRev.has(id));
    const dueAt = (id: string): number => {
      let at = this.nextRedispatch.get(id);
      if (at === undefined) {
        // Settled since the last pass: its grants are at most this old.
        at = now + config.redispatchAfterMs;
        this.nextRedispatch.set(id, at);
      }
      return at;
    };
    const due = settled.filter((id) => dueAt(id) <= now);
    const check = full ? settled : due;
    const revs = await claimRevs(bb, check);
    const moved = new Set(check.filter((id, i) => (revs[i] ?? null) !== this.stepper.idleRev.get(id)));
    const still = check.filter((id) => !moved.has(id));
    for (const id of candidates) {
      if (!this.alive()) return;
      if (!this.stepper.idleRev.has(id) || moved.has(id)) this.runner.kick(id);
    }
    // Dormant claims a late bid would revive, should its event have been lost (they are not active).
    if (full) for (const id of this.stepper.revivable.keys()) if (!this.runner.busy(id)) this.runner.kick(id);
    for (const id of this.stepper.idleRev.keys()) if (!active.has(id)) this.stepper.idleRev.delete(id);
    for (const id of this.nextRedispatch.keys()) if (!active.has(id)) this.nextRedispatch.delete(id);
    await this.redispatch(still);
  }

  private redispatch(ids: string[]): Promise<void> {
    return redispatchDue(this.recoveryDeps(), ids);
  }

  private recoveryDeps(): RecoveryDeps {
    return {
      bb: this.deps.bb,
      log: this.deps.log,
      dispatcher: this.deps.dispatcher,
      redispatchAfterMs: this.deps.config.redispatchAfterMs,
      stepper: this.stepper,
      alive: () => this.alive(),
      kick: (id) => this.runner.kick(id),
      nextRedispatch: this.nextRedispatch,
    };
  }
}
