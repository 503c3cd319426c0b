import { existsSync } from 'node:fs';
import { z } from 'zod';
import type { Blackboard } from '../blackboard/client.ts';
import { currentGrant, type Grant, outputId } from '../blackboard/grants.ts';
import { bidView, claimsToScan, hasBids, unwatchClaims, watchClaims } from '../blackboard/pup-reads.ts';
import type { VersionedClaim } from '../blackboard/replies.ts';
import { type Subscription, subscribe } from '../blackboard/subscriber.ts';
import { type Artefact, GrantNotification } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import { claimContext, GEN_AI, inSpan } from '../telemetry/spans.ts';
import { decideBid } from './bid.ts';
import type { PupConfig } from './config.ts';
import { awaitsBidFrom, type BidChoice, biddingOpen } from './decide.ts';
import type { PupMetrics } from './metrics.ts';
import { redisRetry } from './redis-retry.ts';

/**
 * Bounds of the role's pup claims: a claim Holt's orchestrator leaves dormant stays pending for ever, so
 * old entries go by age and the set by size (the newest stay).
 */
const WATCH_MAX_AGE_MS = 24 * 3600_000;
const WATCH_MAX = 5_000;

/** claim_events carries the whole claim, but only as a hint: the watcher re-reads the stored claim. */
const ClaimEvent = z.looseObject({ id: z.uuid(), artefact_id: z.string().optional().catch(undefined) });

export type GrantSource = 'event' | 'rescan' | 'claim_event';

export interface WatcherDeps {
  bb: Blackboard;
  cfg: PupConfig;
  log: Logger;
  metrics: PupMetrics;
  /** Standard mode only: hands a grant to the executor; false when its queue is full. */
  onGrant?: (g: Grant, via: GrantSource) => boolean;
  /** Resolves when a bid may go out (standard mode: the grant queue has room). */
  bidRoom?: () => Promise<void>;
  /** Replaces the script/strategy decision (LLM agents: model bid, pause, own answers). */
  decideBid?: (target: Artefact) => Promise<BidChoice>;
}

/**
 * The claim watcher: bids on every claim open for bidding and finds this role's grants. Pub/sub is only
 * a hint (at-most-once): at start and every re-scan interval it also reads the active claims and bids on
 * those lacking this role's bid and offers the grants lacking this role's output. The active claims are
 * our orchestrator's index plus the claims this role bid on or was assigned (`pupClaims`), so grants
 * are found under Holt's orchestrator too, which keeps no index.
 */
export class ClaimWatcher {
  private readonly deps: WatcherDeps;
  private subs: Subscription[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Claims to bid on, each with its target's id as the claim event said (a hint: checked). */
  private readonly toBid = new Map<string, string | undefined>();
  /** Bids running now (at most cfg.bidConcurrency), by claim. */
  private readonly bidding = new Map<string, Promise<void>>();
  private scanning: Promise<void> | undefined;
  /** A scan has read the claims once (the first also reads the dormant ones). */
  private scanned = false;
  private stopped = false;

  constructor(deps: WatcherDeps) {
    this.deps = deps;
  }

  async start(): Promise<void> {
    const { bb, cfg, log } = this.deps;
    const onInvalid = (channel: string, raw: string, error: Error) =>
      log.warn({ event_type: 'invalid_message', channel, raw: raw.slice(0, 500), error: error.message });
    this.subs.push(
      await subscribe(
        cfg.redisUrl,
        [bb.k.channels.claimEvents],
        ClaimEvent,
        (m) => this.bidLater(m.id, m.artefact_id),
        onInvalid,
      ),
    );
    if (this.deps.onGrant) {
      this.subs.push(
        await subscribe(
          cfg.redisUrl,
          [bb.k.channels.agentEvents(cfg.role)],
          GrantNotification,
          (n) => {
            log.info({ event_type: 'grant_received', claim_id: n.claim_id, claim_type: n.claim_type });
            this.offer({ claimId: n.claim_id, claimType: n.claim_type }, 'event');
          },
          onInvalid,
        ),
      );
    }
    this.timer = setInterval(() => void this.rescan(), cfg.rescanIntervalMs);
    await this.rescan();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await Promise.all(this.subs.map((s) => s.close()));
    this.subs = [];
    this.toBid.clear();
    await Promise.all(this.bidding.values());
    await this.scanning;
  }

  private redis<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return redisRetry(this.deps.cfg.redisRetries, this.deps.log, what, fn);
  }

  /** Re-reads the active claims: bids where this role's bid is missing, offers grants lacking output. */
  rescan(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.scanning ??= this.scan()
      .catch((e: unknown) => this.deps.log.warn({ event_type: 'rescan_failed', error: String(e) }))
      .finally(() => {
        this.scanning = undefined;
      });
    return this.scanning;
  }

  private async scan(): Promise<void> {
    const { bb, cfg } = this.deps;
    // The first scan also reads dormant claims: one closed while this pup was not up (it was silent)
    // takes its bid now, which re-opens the claim's bidding. Later ones bid live or late anyway.
    const first = !this.scanned;
    const { active, watched, dormant } = await this.redis('claims_to_scan', () =>
      claimsToScan(bb, cfg.role, first),
    );
    const ids = [...new Set([...active, ...watched, ...dormant])];
    const read = await this.readClaims(ids);
    const claims = read.filter((c): c is VersionedClaim => c !== null).map((c) => c.claim);
    if (watched.length) {
      const byId = new Map(ids.map((id, i) => [id, read[i]?.claim]));
      const settled = watched.filter((id) => {
        const c = byId.get(id);
        return !c || c.status === 'complete' || c.status === 'terminated' || c.dormant_reason !== undefined;
      });
      await this.redis('unwatch_claims', () =>
        unwatchClaims(bb, cfg.role, settled, Date.now() - WATCH_MAX_AGE_MS, WATCH_MAX),
      );
    }
    const open = claims.filter((c) => biddingOpen(c) && awaitsBidFrom(c, cfg.role));
    const bid = await this.redis('has_bids', () =>
      hasBids(
        bb,
        open.map((c) => c.id),
        cfg.role,
      ),
    );
    open.forEach((c, i) => {
      if (!bid[i]) this.bidLater(c.id);
    });
    // Only now: a scan that failed before this reads the dormant claims again next time.
    this.scanned = true;
    if (!this.deps.onGrant) return;
    const grants: Grant[] = [];
    for (const c of claims) {
      const t = currentGrant(c, cfg.role);
      if (t) grants.push({ claimId: c.id, claimType: t });
    }
    const outs = grants.map((g) => outputId(cfg.instance, g.claimId, cfg.role, g.claimType));
    const have = await this.redis('outputs_exist', () => bb.artefactsExist(outs));
    for (const [i, g] of grants.entries()) {
      if (have[i] || this.stopped) continue;
      if (!this.deps.onGrant(g, 'rescan')) break; // queue full: the next scan continues
    }
  }

  /** A malformed claim reads as missing (the blackboard reports it): it never hides the others. */
  private readClaims(ids: string[]): Promise<(VersionedClaim | null)[]> {
    return this.redis('get_claims', () => this.deps.bb.getClaims(ids));
  }

  /** Hands a heard grant to the executor; a full queue refuses it, which is said (the re-scan offers it again). */
  private offer(g: Grant, via: 'event' | 'claim_event'): void {
    if (this.deps.onGrant?.(g, via) !== false) return;
    this.deps.log.info({
      event_type: 'grant_deferred',
      claim_id: g.claimId,
      reason: 'grant queue full; the re-scan offers it again',
    });
  }

  private bidLater(claimId: string, targetHint?: string): void {
    if (this.stopped) return;
    this.toBid.set(claimId, targetHint ?? this.toBid.get(claimId));
    this.pump();
  }

  /**
   * Bids on up to cfg.bidConcurrency claims at once, so a burst of claims never queues its bids behind
   * one another past the bid timeout. A claim is bid on by one task at a time.
   */
  private pump(): void {
    while (!this.stopped && this.bidding.size < this.deps.cfg.bidConcurrency) {
      let next: string | undefined;
      let hint: string | undefined;
      for (const [id, h] of this.toBid)
        if (!this.bidding.has(id)) {
          next = id;
          hint = h;
          break;
        }
      if (next === undefined) return;
      this.toBid.delete(next);
      const task = (async () => {
        await this.deps.bidRoom?.();
        if (!this.stopped) await this.bidOn(next, hint);
      })()
        .catch((e: unknown) =>
          this.deps.log.warn({ event_type: 'bid_failed', claim_id: next, error: String(e) }),
        )
        .finally(() => {
          this.bidding.delete(next);
          this.pump();
        });
      this.bidding.set(next, task);
    }
  }

  private async bidOn(claimId: string, targetHint: string | undefined): Promise<void> {
    const { bb, cfg, log, metrics } = this.deps;
    const view = await this.redis('bid_view', () => bidView(bb, claimId, cfg.role, targetHint));
    if (!view.claim) return;
    const claim = view.claim.claim;
    if (!biddingOpen(claim)) {
      // A feedback claim is assigned, not bid on (Holt pushes it straight to the work queue).
      const t = currentGrant(claim, cfg.role);
      if (t && claim.status === 'pending_assignment' && this.deps.onGrant) {
        await this.redis('watch_claims', () => watchClaims(bb, cfg.role, [claimId]));
        this.offer({ claimId, claimType: t }, 'claim_event');
      }
      return;
    }
    if (view.hasBid || this.stopped) return;
    let target = view.target ?? null;
    if (view.target === undefined) {
      try {
        target = await this.redis('get_target', () => bb.getArtefact(claim.artefact_id));
      } catch (e) {
        log.warn({ event_type: 'target_unreadable', claim_id: claimId, error: String(e) });
      }
    }
    const script = cfg.bidScript
      ? {
          argv: cfg.bidScript,
          cwd: existsSync(cfg.workspace) ? cfg.workspace : process.cwd(),
          timeoutMs: cfg.bidScriptTimeoutMs,
          runner: cfg.runner,
          callId: `bid:${claimId}:${cfg.role}`,
        }
      : undefined;
    // The bid in its span, in the claim's trace: what was bid, how it was decided, why it fell back.
    await inSpan(
      `bid ${cfg.role}`,
      {
        attributes: { [GEN_AI.agentName]: cfg.role, 'holt.claim.id': claimId },
        parent: claimContext(claim),
      },
      async (span) => {
        // A pup that cannot read the target says so with `ignore` rather than leaving consensus waiting.
        const choice = target
          ? await (this.deps.decideBid
              ? this.deps.decideBid(target)
              : decideBid(target, cfg.biddingStrategy, script))
          : {
              bid: 'ignore' as const,
              source: 'default' as const,
              fallbackReason: 'target artefact unreadable',
            };
        span.setAttributes({ 'holt.bid.type': choice.bid, 'holt.bid.source': choice.source });
        if (choice.fallbackReason) {
          span.addEvent('bid_fallback', { reason: choice.fallbackReason });
          log.warn({
            event_type: 'bid_fallback',
            claim_id: claimId,
            reason: choice.fallbackReason,
            bid: choice.bid,
          });
        }
        if (this.stopped) return;
        await this.redis('set_bid', () =>
          bb.setBid(claimId, cfg.role, choice.bid, this.deps.onGrant !== undefined),
        );
        metrics.bids.inc({ bid_type: choice.bid, source: choice.source });
        log.info({
          event_type: 'bid_submitted',
          claim_id: claimId,
          bid_type: choice.bid,
          source: choice.source,
        });
      },
    );
  }
}
