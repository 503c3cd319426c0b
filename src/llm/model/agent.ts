import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { writeAgentStatus } from '../../blackboard/agent-status.ts';
import type { ErrorClass } from '../../blackboard/error-class.ts';
import { errorMessage } from '../../common/errors.ts';
import type { Logger } from '../../common/logger.ts';
import type { Scrubber } from '../../common/secrets.ts';
import type { LlmSettings } from '../config.ts';
import type { UsageStore } from '../stores/usage-store.ts';
import {
  afterError,
  afterSuccess,
  type BudgetVerdict,
  checkBudget,
  costOf,
  type ErrorState,
  estimateCall,
  type Ledger,
  type UsageRecord,
} from './budget.ts';
import { ClassifiedError, classOf, pausesAtOnce } from './errors.ts';
import {
  type ChatOptions,
  type ChatReply,
  type ChatRequest,
  type ModelClient,
  ModelError,
  type Usage,
} from './model.ts';

/** The agent is paused (a config, auth or quota error, a budget, too many errors in a row): no call is made. */
export class PausedError extends ClassifiedError {
  constructor(message: string, errorClass: ErrorClass) {
    super(message, errorClass);
    this.name = 'PausedError';
  }
}

export interface LlmAgentDeps {
  instance: string;
  role: string;
  settings: LlmSettings;
  model: ModelClient;
  /** Absent for agents that only bid with the model: no ledger, limits apply per process. */
  usage?: UsageStore;
  redis?: Redis;
  log: Logger;
  /** Every credential the pup holds, cut out of each request (bids read other agents' payloads too). */
  scrub?: Scrubber;
  now?: () => number;
}

/**
 * Every model call of one agent goes through here (docs/runtime-model.md § Budgets and error classes): the budget is checked against the
 * role's ledger before the call (no debt), usage and cost are recorded after it, consecutive errors
 * back off exponentially and pause the agent after N; the status hash is rewritten each time.
 */
export class LlmAgent {
  readonly deps: LlmAgentDeps;
  private errors: ErrorState = afterSuccess();
  private nextCallAtMs = 0;
  private paused: { reason: string; untilMs?: number; errorClass: ErrorClass } | undefined;
  /** Calls of a store-less (bid-only) agent, for its window. */
  private local: { atMs: number; tokens: number; costUsd: number }[] = [];
  constructor(d: LlmAgentDeps) {
    this.deps = d;
  }

  private now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  /** Why the agent is paused now, if it is (a timed pause lifts by itself). */
  pausedReason(): string | undefined {
    if (this.paused?.untilMs !== undefined && this.paused.untilMs <= this.now()) {
      this.deps.log.info({ event_type: 'llm_agent_resumed', after: this.paused.reason });
      this.paused = undefined;
      this.errors = afterSuccess();
      void this.publishStatus();
    }
    return this.paused?.reason;
  }

  /** The class of the error that paused the agent (with `pausedReason`). */
  pausedClass(): ErrorClass | undefined {
    return this.pausedReason() === undefined ? undefined : this.paused?.errorClass;
  }

  private pause(why: string, untilMs: number | undefined, errorClass: ErrorClass): PausedError {
    // The reason is shown in status and events; a server's error text may echo what it was sent.
    const reason = this.deps.scrub ? this.deps.scrub.text(why) : why;
    this.paused = { reason, untilMs, errorClass };
    this.deps.log.warn({
      event_type: 'llm_agent_paused',
      reason,
      error_class: errorClass,
      until_ms: untilMs ?? null,
    });
    void this.publishStatus();
    return new PausedError(`agent paused: ${reason}`, errorClass);
  }

  private async ledger() {
    const { usage, instance, role, settings } = this.deps;
    if (usage) return usage.ledger(instance, role, settings.budget.windowMs);
    const from = this.now() - settings.budget.windowMs;
    this.local = this.local.filter((r) => r.atMs > from);
    return { window: this.local, totalCostUsd: 0 };
  }

  /** Books a call's estimate (the shared ledger when there is one, else this process's own). */
  private async book(
    purpose: 'bid' | 'turn' | 'plan',
    turnId: string | null,
    est: Usage,
    estCost: number,
    check: (l: Ledger) => BudgetVerdict,
  ): Promise<{
    verdict: BudgetVerdict;
    settle(u: Usage, cost: number): Promise<void>;
    cancel(): Promise<void>;
  }> {
    const { usage, instance, role, settings } = this.deps;
    if (usage) {
      const r = await usage.reserve(
        instance,
        role,
        turnId,
        purpose,
        settings.budget.windowMs,
        est,
        estCost,
        check,
      );
      const id = r.id;
      return {
        verdict: r.verdict,
        settle: (u, cost) => (id ? usage.settle(id, u, cost) : Promise.resolve()),
        cancel: () => (id ? usage.cancel(id) : Promise.resolve()),
      };
    }
    const verdict = check(await this.ledger());
    if (!verdict.ok) return { verdict, settle: async () => undefined, cancel: async () => undefined };
    const rec: UsageRecord = { atMs: this.now(), tokens: est.totalTokens, costUsd: estCost };
    this.local.push(rec);
    return {
      verdict,
      settle: async (u, cost) => {
        rec.tokens = u.totalTokens;
        rec.costUsd = cost;
      },
      cancel: async () => {
        this.local = this.local.filter((r) => r !== rec);
      },
    };
  }

  async call(
    purpose: 'bid' | 'turn' | 'plan',
    turnId: string | null,
    req: ChatRequest,
    opts: ChatOptions = {},
  ): Promise<ChatReply & { costUsd: number }> {
    const { settings, log } = this.deps;
    const why = this.pausedReason();
    if (why) throw new PausedError(`agent paused: ${why}`, this.paused?.errorClass ?? 'transient');
    const chars = JSON.stringify(req.messages).length + JSON.stringify(req.tools ?? []).length;
    const est = estimateCall(chars, settings.maxTokens);
    const estCost = costOf(est, settings.prices);
    const check = (l: Ledger) => checkBudget(l, settings.budget, est, estCost, this.now());
    // The estimate is booked before the call (shared ledger: under the role's lock), so concurrent
    // callers, in this pod or another, can never spend the same remainder twice.
    const booked = await this.book(purpose, turnId, est, estCost, check);
    if (!booked.verdict.ok) throw this.pause(booked.verdict.reason, booked.verdict.retryAtMs, 'quota');
    const wait = this.nextCallAtMs - this.now();
    if (wait > 0) await sleep(wait, undefined, { signal: opts.signal }).catch(() => undefined);
    let reply: ChatReply;
    try {
      const sent = this.deps.scrub ? { ...req, messages: this.deps.scrub.json(req.messages) } : req;
      reply = await this.deps.model.chat(sent, {
        ...opts,
        onRetry: (error, attempt, delayMs) =>
          log.warn({ event_type: 'llm_retry', purpose, attempt, delay_ms: delayMs, error }),
      });
    } catch (e) {
      await booked.cancel();
      if (opts.signal?.aborted) throw e;
      const next = afterError(this.errors, settings.budget, this.now());
      this.errors = { consecutive: next.consecutive };
      this.nextCallAtMs = this.now() + next.delayMs;
      const msg = errorMessage(e);
      const cls = classOf(e);
      log.warn({
        event_type: 'llm_call_failed',
        purpose,
        error_class: cls,
        consecutive_errors: next.consecutive,
        error: msg,
      });
      // Nothing this agent sends can succeed until someone fixes the key, the settings or the quota.
      if (pausesAtOnce(cls)) this.pause(`${cls}: ${msg}`, this.now() + settings.budget.errorPauseMs, cls);
      else if (next.pausedUntilMs !== undefined)
        this.pause(`${next.consecutive} model errors in a row (last: ${msg})`, next.pausedUntilMs, cls);
      else void this.publishStatus();
      throw e instanceof ModelError ? e : new ModelError(msg, cls);
    }
    this.errors = afterSuccess();
    this.nextCallAtMs = 0;
    // A server that reports no usage is charged the estimate, never nothing.
    const used = reply.usage.totalTokens > 0 ? reply.usage : est;
    const costUsd = costOf(used, settings.prices);
    await booked.settle(used, costUsd);
    await this.publishStatus();
    return { ...reply, costUsd };
  }

  /** Rewrites `holt:{i}:agent_status:{role}` (best effort: status is for people, not for decisions). */
  /**
   * Status writes are chained so they land in the order they were asked for: a slow "active" write
   * must never overwrite the "paused" that followed it. Each reads the state when it runs.
   */
  publishStatus(): Promise<void> {
    this.statusChain = this.statusChain.then(() => this.writeStatus());
    return this.statusChain;
  }

  private statusChain: Promise<void> = Promise.resolve();

  private async writeStatus(): Promise<void> {
    const { redis, instance, role, settings } = this.deps;
    if (!redis) return;
    try {
      const l = await this.ledger();
      const b = settings.budget;
      const inWindow = l.window.filter((r) => r.atMs > this.now() - b.windowMs);
      await writeAgentStatus(redis, instance, role, {
        state: this.paused ? 'paused' : 'active',
        paused_reason: this.paused?.reason ?? '',
        paused_class: this.paused?.errorClass ?? '',
        paused_until_ms: this.paused?.untilMs ?? 0,
        model: settings.model,
        calls_in_window: inWindow.length,
        tokens_in_window: inWindow.reduce((n, r) => n + r.tokens, 0),
        window_ms: b.windowMs,
        calls_limit: b.calls ?? 0,
        tokens_limit: b.tokens ?? 0,
        cost_usd_total: l.totalCostUsd,
        cost_usd_limit: b.costUsd ?? 0,
        consecutive_errors: this.errors.consecutive,
        updated_at_ms: this.now(),
      });
    } catch (e) {
      this.deps.log.warn({ event_type: 'agent_status_write_failed', error: String(e) });
    }
  }
}
