import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Blackboard } from '../blackboard/client.ts';
import { acquireLock, lockHolder, releaseLock } from '../blackboard/instance-lease.ts';
import type { Subscription } from '../blackboard/subscriber.ts';
import type { AgentRegistration } from '../blackboard/types.ts';
import { createLogger, type Logger, redactUrl } from '../common/logger.ts';
import type { OrchestratorConfig } from './config.ts';
import { DispatchRouter, type GrantDispatcher, HoltDispatcher } from './dispatch.ts';
import { LeaderTerm } from './leader-term.ts';
import { OrchestratorMetrics } from './metrics.ts';
import { Quarantine } from './quarantine.ts';
import type { StepHook } from './step.ts';
import { traceWorkflows } from './workflow-trace.ts';

const STOP_GRACE_MS = 5_000;

export interface OrchestratorOptions {
  config: OrchestratorConfig;
  logger?: Logger;
  /** Grants to standard roles (default: Holt's grant notification + claim_granted). */
  dispatcher?: GrantDispatcher;
  /** Grants to scalable roles (the worker-pool inbox); default: the standard path. */
  scalableDispatcher?: GrantDispatcher;
  /** Called at every step boundary (tests inject crashes here). */
  onStep?: StepHook;
  /** Lease holder id (default: host, pid and a random suffix). */
  holder?: string;
  /** Write each workflow's span at its end (workflow-trace.ts): set when traces are exported. */
  traceWorkflows?: boolean;
}

/**
 * Holt's claim engine for one instance. Only the holder of the instance lease works; the others are
 * standbys that poll and take over when the lease expires. Losing the lease stops work at once.
 */
export class Orchestrator {
  readonly config: OrchestratorConfig;
  readonly bb: Blackboard;
  readonly log: Logger;
  readonly metrics = new OrchestratorMetrics();
  readonly holder: string;
  readonly quarantine: Quarantine;
  private readonly registry = new Map<string, AgentRegistration>();
  private readonly dispatcher: GrantDispatcher;
  private readonly onStep: StepHook | undefined;
  private term: LeaderTerm | null = null;
  private leaseValidUntil = 0;
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;
  private leaderWaiters: (() => void)[] = [];
  private readonly traceWorkflows: boolean;
  private workflows: Promise<Subscription | undefined> = Promise.resolve(undefined);

  constructor(opts: OrchestratorOptions) {
    this.config = opts.config;
    this.holder = opts.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.log = opts.logger ?? createLogger('orchestrator', { instance: opts.config.instance });
    // Auto-pipelining: the commands that many concurrent claim steps issue in one tick go out in one
    // socket write instead of one write syscall each (the largest single cost under load in the bench).
    this.quarantine = new Quarantine({
      bb: () => this.bb,
      log: this.log,
      metrics: this.metrics,
      alive: () => this.isLeader(),
    });
    this.bb = Blackboard.connect(
      opts.config.redisUrl,
      opts.config.instance,
      { enableAutoPipelining: true },
      { onMalformed: this.quarantine.malformed },
    );
    this.bb.redis.on('error', () => {
      // ioredis reconnects by itself; failed commands surface in the steps and in /healthz
    });
    const holt =
      opts.dispatcher ?? new HoltDispatcher(this.bb, (role) => this.registry.get(role)?.image_id ?? '');
    this.dispatcher = new DispatchRouter(
      holt,
      opts.scalableDispatcher ?? holt,
      (role) => this.registry.get(role)?.kind,
    );
    this.onStep = opts.onStep;
    this.traceWorkflows = opts.traceWorkflows ?? false;
  }

  isLeader(): boolean {
    return this.term !== null && Date.now() < this.leaseValidUntil;
  }

  /** Resolves once this orchestrator holds the lease and has finished its recovery. */
  whenLeader(): Promise<void> {
    if (this.term && this.isLeader()) return Promise.resolve();
    return new Promise((resolve) => this.leaderWaiters.push(resolve));
  }

  async ping(): Promise<void> {
    await this.bb.redis.ping();
  }

  start(): void {
    this.log.info(
      { event_type: 'orchestrator_starting', holder: this.holder, redis: redactUrl(this.config.redisUrl) },
      'orchestrator_starting',
    );
    this.loop = this.leaseLoop();
    if (this.traceWorkflows)
      this.workflows = traceWorkflows({
        bb: this.bb,
        redisUrl: this.config.redisUrl,
        isLeader: () => this.isLeader(),
        log: this.log,
      }).catch((e: unknown) => {
        this.log.warn({ event_type: 'workflow_trace_failed', error: String(e) }, 'workflow spans off');
        return undefined;
      });
  }

  private async leaseLoop(): Promise<void> {
    const { leaseTtlMs, standbyPollMs } = this.config;
    const renewEvery = Math.max(50, Math.floor(leaseTtlMs / 3));
    let waitingLogged = false;
    while (!this.abort.signal.aborted) {
      const t0 = Date.now();
      let held = false;
      try {
        held = await acquireLock(this.bb, this.holder, leaseTtlMs);
      } catch (e) {
        this.log.warn({ event_type: 'lease_error', error: (e as Error).message }, 'lease_error');
      }
      if (this.abort.signal.aborted) break;
      if (held) {
        // Valid from when we asked, not from when Redis answered: never overestimate the lease.
        this.leaseValidUntil = t0 + leaseTtlMs;
        if (!this.term) void this.lead();
      } else if (this.term && (Date.now() >= this.leaseValidUntil || !(await this.stillOurs()))) {
        this.loseLease();
      } else if (!this.term && !waitingLogged) {
        waitingLogged = true;
        this.log.info(
          { event_type: 'standby', holder: await lockHolder(this.bb).catch(() => null) },
          'standby',
        );
      }
      await sleep(this.term ? renewEvery : standbyPollMs, undefined, { signal: this.abort.signal }).catch(
        () => undefined,
      );
    }
  }

  /** After a failed renewal: is the lease still ours? A Redis error counts as yes until it expires. */
  private async stillOurs(): Promise<boolean> {
    try {
      const h = await lockHolder(this.bb);
      return h === this.holder;
    } catch {
      return true;
    }
  }

  private async lead(): Promise<void> {
    this.metrics.leader.set(1);
    this.log.info({ event_type: 'lease_acquired', holder: this.holder }, 'lease_acquired');
    const term = new LeaderTerm({
      bb: this.bb,
      config: this.config,
      log: this.log,
      metrics: this.metrics,
      dispatcher: this.dispatcher,
      registry: this.registry,
      quarantine: this.quarantine,
      leaseValid: () => Date.now() < this.leaseValidUntil && !this.abort.signal.aborted,
      onStep: this.onStep,
    });
    this.term = term;
    try {
      await term.start();
      if (this.term !== term) return; // the lease went while the term was starting
      for (const w of this.leaderWaiters.splice(0)) w();
    } catch (e) {
      if (this.term !== term) return;
      this.log.error({ event_type: 'error', during: 'term_start', error: (e as Error).message }, 'error');
      // Give the lease up so a healthy standby (or our next attempt) starts cleanly.
      term.halt();
      this.term = null;
      this.metrics.leader.set(0);
      this.leaseValidUntil = 0;
      await releaseLock(this.bb, this.holder).catch(() => undefined);
    }
  }

  private loseLease(): void {
    this.log.warn({ event_type: 'lease_lost', holder: this.holder }, 'lease_lost');
    this.term?.halt();
    this.term = null;
    this.leaseValidUntil = 0;
    this.metrics.leader.set(0);
  }

  /** Graceful stop: finish the steps in flight, then hand the lease over at once. */
  async stop(): Promise<void> {
    this.abort.abort();
    const term = this.term;
    this.term = null;
    // Bounded: with Redis gone, steps and the release would otherwise wait for ioredis' retries.
    const bounded = (p: Promise<unknown>) => Promise.race([p.catch(() => undefined), sleep(STOP_GRACE_MS)]);
    if (term) {
      await bounded(term.stop());
      await bounded(this.quarantine.settled());
      await bounded(releaseLock(this.bb, this.holder));
    }
    this.metrics.leader.set(0);
    await bounded(this.workflows.then((w) => w?.close()));
    await this.bb.close();
    if (this.loop) await bounded(this.loop);
    this.log.info({ event_type: 'orchestrator_stopped', holder: this.holder }, 'orchestrator_stopped');
  }

  /** Dies on the spot, as a crash would: no more writes, no lease release (tests only). */
  halt(): void {
    this.abort.abort();
    this.term?.halt();
    this.term = null;
    this.bb.redis.disconnect();
  }
}
