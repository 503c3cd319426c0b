import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Blackboard } from '../blackboard/client.ts';
import type { ErrorClass } from '../blackboard/error-class.ts';
import { currentGrant, type Grant, outputId } from '../blackboard/grants.ts';
import { backoffMs, errorPause, retry } from '../common/backoff.ts';
import { ConfigError } from '../common/config.ts';
import { type Check, startProbeServer } from '../common/http.ts';
import { type Logger, redactUrl, silentLogger } from '../common/logger.ts';
import { CommandExecutor } from './command-executor.ts';
import type { PupConfig } from './config.ts';
import type { GrantExecutor, ModelPlugin, Outcome } from './executor.ts';
import { GrantQueue } from './grant-queue.ts';
import { CustomHealthCheck } from './health.ts';
import type { startInboxWorker } from './inbox-worker.ts';
import { PupMetrics } from './metrics.ts';
import { ClaimWatcher, type GrantSource } from './watcher.ts';
import type { WorkerEnv } from './worker-env.ts';

const PING_TIMEOUT_MS = 2_000;

/** Starts the model plugin once the runner answers, on the pup's blackboard connection and metrics. */
export type StartModelPlugin = (deps: {
  bb: Blackboard;
  log: Logger;
  registry: PupMetrics['registry'];
  /** Counts a Failure artefact the runtime wrote, by class (holt_pup_failures_total). */
  countFailure: (c: ErrorClass) => void;
}) => Promise<ModelPlugin>;

/**
 * One agent's runner. standard: watcher + executor joined by a bounded grant queue; controller: watcher
 * only (bids); worker: `runClaim` for one claim. Usable in-process (tests) and from main.ts.
 */
export class Pup {
  readonly cfg: PupConfig;
  readonly log: Logger;
  readonly metrics: PupMetrics;
  readonly bb: Blackboard;
  private executor: GrantExecutor;
  private readonly startModel: StartModelPlugin | undefined;
  private model: ModelPlugin | undefined;
  private inbox: Awaited<ReturnType<typeof startInboxWorker>> | undefined;
  private readonly queue: GrantQueue<Grant>;
  /** A grant was refused (queue full) since the last re-scan the executor asked for. */
  private refused = false;
  /** Output ids queued or running here, so a grant seen twice (event + re-scan) runs once. */
  private readonly inFlight = new Set<string>();
  private watcher: ClaimWatcher | undefined;
  private probe: { port: number; close(): Promise<void> } | undefined;
  private custom: CustomHealthCheck | undefined;
  private loop: Promise<void> | undefined;
  private current: Promise<Outcome> | undefined;
  private readonly abort = new AbortController();
  /** Aborted when stop() begins: ends a wait for the stores. */
  private readonly halted = new AbortController();
  /** Why start is not done yet (a store it waits for), for /readyz. */
  private waiting: string | undefined;
  private started = false;
  private stopping = false;
  /** Runs in a row that ended in `error` (Redis trouble, a runner gone): each waits longer. */
  private errorsInRow = 0;

  /** `startModel`: the agent's model plugin (src/llm), wired in by the entry point (src/agent). */
  constructor(cfg: PupConfig, log: Logger = silentLogger(), startModel?: StartModelPlugin) {
    this.cfg = cfg;
    this.log = log;
    this.startModel = startModel;
    this.queue = new GrantQueue<Grant>(cfg.grantQueue);
    this.metrics = new PupMetrics({ instance: cfg.instance, role: cfg.role, mode: cfg.mode });
    const skipped = new Set<string>();
    this.bb = Blackboard.connect(
      cfg.redisUrl,
      cfg.instance,
      {
        maxRetriesPerRequest: cfg.redisRetries,
        connectTimeout: 5_000,
        retryStrategy: (times) => backoffMs(times, { baseMs: 100, maxMs: 5_000, jitter: 'none' }),
      },
      {
        // Read as missing; the orchestrator quarantines it. Logged once here (a scan meets it often).
        onMalformed: (e) => {
          if (skipped.has(`${e.kind}:${e.id}`) || skipped.size > 1_000) return;
          skipped.add(`${e.kind}:${e.id}`);
          log.warn({ event_type: 'malformed_item_skipped', kind: e.kind, id: e.id, detail: e.reason });
        },
        maxPayloadBytes: cfg.maxPayloadBytes,
      },
    );
    let lastError = '';
    this.bb.redis.on('error', (e: Error) => {
      // ioredis reconnects by itself; log each distinct error once rather than on every attempt
      if (e.message !== lastError) log.warn({ event_type: 'redis_error', error: e.message });
      lastError = e.message;
    });
    this.bb.redis.on('ready', () => {
      if (lastError) log.info({ event_type: 'redis_reconnected' });
      lastError = '';
    });
    this.executor = new CommandExecutor({
      bb: this.bb,
      cfg,
      log,
      metrics: this.metrics,
      owner: `${hostname()}/${process.pid}/${randomUUID()}`,
    });
  }

  /**
   * Before any run: the tool runner answers (in a pod it is another container, which may start a
   * moment after this one), then the model plugin if the agent has a model.
   */
  private async prepare(): Promise<void> {
    await retry(() => this.cfg.runner.ping(), {
      tries: 40,
      baseMs: 100,
      maxMs: 2_000,
      onRetry: (e, attempt) =>
        attempt === 5 && this.log.warn({ event_type: 'runner_waiting', error: String(e) }),
    });
    // The model plugin connects to its own stores (NATS, Postgres), which may start later too.
    await this.waitForStores('model plugin stores', () => this.startModelPlugin());
  }

  /** A model-driven agent: its runtime bids, and its executor (if it executes) replaces the command one. */
  private async startModelPlugin(): Promise<void> {
    if (!this.startModel || this.model) return;
    this.model = await this.startModel({
      bb: this.bb,
      log: this.log,
      registry: this.metrics.registry,
      countFailure: (c) => this.metrics.failures.inc({ class: c }),
    });
    if (this.model.executor) this.executor = this.model.executor;
  }

  /** The probe server's port (useful when HOLT_HEALTH_PORT=0). */
  get port(): number | undefined {
    return this.probe?.port;
  }

  /**
   * Probes first, then waits for Redis (a Service name that does not resolve yet, a store still
   * starting: retried with backoff for `storeWaitMs`, as the orchestrator waits), then starts the
   * watcher and (standard) the executor loop. Ready only once the watcher has subscribed and made its
   * first scan, i.e. the pup can bid; live meanwhile, so the kubelet does not restart a pup that waits.
   */
  async start(): Promise<void> {
    const { cfg, log } = this;
    await this.startProbes();
    await this.waitForStores('redis', () => this.ping());
    await this.prepare();
    if (cfg.healthCheck) {
      this.custom = new CustomHealthCheck(
        { ...cfg.healthCheck, cwd: cfg.workspace, runner: cfg.runner },
        log,
      );
      this.custom.start();
    }
    const standard = cfg.mode === 'standard';
    const model = this.model;
    this.watcher = new ClaimWatcher({
      bb: this.bb,
      cfg,
      log,
      metrics: this.metrics,
      onGrant: standard ? (g, via) => this.offer(g, via) : undefined,
      // Bidding waits while the queue is full: a pup never wins more work than it can hold.
      bidRoom: standard ? () => this.queue.room() : undefined,
      decideBid: model ? (t) => model.decideBid(t) : undefined,
    });
    if (standard) this.loop = this.executeLoop();
    await this.watcher.start();
    this.started = true;
    log.info({
      event_type: 'pup_started',
      mode: cfg.mode,
      redis: redactUrl(cfg.redisUrl),
      health_port: this.probe?.port,
      workspace: cfg.workspace,
    });
  }

  private async startProbes(): Promise<void> {
    this.probe ??= await startProbeServer({
      port: this.cfg.healthPort,
      // While starting the process is alive (it waits for its stores, and says why on /readyz).
      healthz: () =>
        this.started ? this.health() : Promise.resolve({ ok: true, details: { starting: true } }),
      readyz: () => this.ready(),
      registry: this.metrics.registry,
    });
  }

  /**
   * Runs `fn` until it succeeds, for up to `storeWaitMs`: a pod's stores (or their Service names)
   * may come up after it. Each failure is logged with the next pause (doubling to 8 s) and shown on
   * /readyz; a configuration error, or a stop, ends the wait at once.
   */
  private async waitForStores<T>(store: string, fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.cfg.storeWaitMs;
    for (let attempt = 1; ; attempt++) {
      try {
        const v = await fn();
        if (this.waiting) this.log.info({ event_type: 'stores_reachable', store, attempts: attempt });
        this.waiting = undefined;
        return v;
      } catch (e) {
        const left = deadline - Date.now();
        if (e instanceof ConfigError || this.stopping || left <= 0) throw e;
        const delayMs = Math.min(left, errorPause(attempt, 500, 8_000));
        this.waiting = `waiting for ${store}: ${(e as Error).message}`;
        this.log.warn(
          { event_type: 'stores_unavailable', store, attempt, retry_ms: delayMs, error: String(e) },
          `${store} not reachable yet; retrying`,
        );
        await sleep(delayMs, undefined, { signal: this.halted.signal }).catch(() => undefined);
      }
    }
  }

  /** `/readyz`: started, healthy, and the custom check (if any) has run and passed at least once. */
  private async ready(): Promise<Check> {
    if (!this.started || this.stopping)
      return { ok: false, reason: this.stopping ? 'shutting down' : (this.waiting ?? 'starting') };
    if (this.custom && !this.custom.checked) return { ok: false, reason: 'health check not run yet' };
    return this.health();
  }

  /** `/healthz`: Redis answers a PING and the custom check (if any) passes. */
  async health(): Promise<Check> {
    try {
      await this.ping();
    } catch (e) {
      return { ok: false, reason: `redis: ${(e as Error).message}`, details: { redis: 'disconnected' } };
    }
    const bus = this.inbox?.problem() ?? this.model?.problem() ?? null;
    if (bus) return { ok: false, reason: bus, details: { redis: 'connected', nats: 'closed' } };
    const c = this.custom?.status;
    if (c && !c.ok)
      return { ok: false, reason: c.reason, details: { redis: 'connected', health_check: 'failing' } };
    return {
      ok: true,
      details: { redis: 'connected', mode: this.cfg.mode, busy: this.current !== undefined },
    };
  }

  private async ping(): Promise<void> {
    const ac = new AbortController();
    try {
      await Promise.race([
        this.bb.redis.ping(),
        sleep(PING_TIMEOUT_MS, undefined, { signal: ac.signal }).then(() => {
          throw new Error(`no PING reply within ${PING_TIMEOUT_MS} ms`);
        }),
      ]);
    } finally {
      ac.abort();
    }
  }

  private offer(g: Grant, via: GrantSource): boolean {
    if (this.stopping) return false;
    const id = outputId(this.cfg.instance, g.claimId, this.cfg.role, g.claimType);
    if (this.inFlight.has(id)) return true;
    if (!this.queue.offer(g)) {
      this.refused = true;
      return false;
    }
    this.inFlight.add(id);
    this.metrics.grants.inc({ claim_type: g.claimType, via });
    this.log.info({ event_type: 'grant_queued', claim_id: g.claimId, claim_type: g.claimType, via });
    return true;
  }

  private async executeLoop(): Promise<void> {
    for (;;) {
      const g = await this.queue.take();
      if (!g) return;
      this.current = this.executor.execute(g, this.abort.signal);
      const outcome = await this.current;
      this.current = undefined;
      this.inFlight.delete(outputId(this.cfg.instance, g.claimId, this.cfg.role, g.claimType));
      if (outcome === 'error') await this.pauseAfterError(g);
      else this.errorsInRow = 0;
      // A grant refused by a full queue is still open on the blackboard: look for it once there is room.
      // Not after a turn that waits (for an Answer, a lease): the timer re-scan retries it without spinning.
      if (!this.stopping && this.refused && outcome !== 'waiting' && outcome !== 'leased_elsewhere') {
        this.refused = false;
        void this.watcher?.rescan();
      }
    }
  }

  /** The grant is still open and the re-scan would run it again at once: wait first, longer each time. */
  private async pauseAfterError(g: Grant): Promise<void> {
    this.errorsInRow++;
    const delayMs = errorPause(this.errorsInRow, this.cfg.errorBackoffMs);
    this.log.warn({
      event_type: 'execution_backoff',
      claim_id: g.claimId,
      errors_in_row: this.errorsInRow,
      delay_ms: delayMs,
    });
    await sleep(delayMs, undefined, { signal: this.abort.signal }).catch(() => undefined);
  }

  /**
   * Inbox worker mode (HOLT_MODE=worker without --execute-claim): probes, then claims from the inbox
   * of the role's worker target until stopped. No bidding: the controller pup bids for the role.
   */
  async startInbox(env: WorkerEnv): Promise<void> {
    await this.startProbes();
    await this.waitForStores('redis', () => this.ping());
    await this.prepare();
    this.inbox = await this.openInbox(env);
    await this.inbox.worker.start();
    this.started = true;
    this.log.info({
      event_type: 'pup_started',
      mode: 'worker',
      source: 'inbox',
      health_port: this.probe?.port,
    });
  }

  private async openInbox(env: WorkerEnv): ReturnType<typeof startInboxWorker> {
    // Loaded only by workers: a bidding pup never pays for Postgres or NATS.
    const { startInboxWorker } = await import('./inbox-worker.ts');
    return startInboxWorker({ cfg: this.cfg, env, bb: this.bb, executor: this.executor, log: this.log });
  }

  /** `--execute-claim` through the grant's inbox row; `no_row` when the claim has none (not scalable). */
  async runInboxClaim(env: WorkerEnv, claimId: string): Promise<string> {
    await this.prepare();
    this.inbox = await this.openInbox(env);
    return this.inbox.worker.runGrant(claimId, this.cfg.role);
  }

  /** The state of the grant's inbox rows (why `runInboxClaim` found none due). */
  async grantRows(claimId: string): Promise<string[]> {
    return (await this.inbox?.worker.opts.store.grantRows(this.cfg.instance, claimId, this.cfg.role)) ?? [];
  }

  /** Worker mode: one claim, in the phase the claim is in; exit code semantics as Holt (tool failure is 0). */
  async runClaim(claimId: string): Promise<{ code: number; outcome: Outcome | 'no_claim' | 'not_granted' }> {
    await this.prepare();
    const vc = await retry(() => this.bb.getClaim(claimId), { tries: this.cfg.redisRetries });
    if (!vc) {
      this.log.error({ event_type: 'claim_not_found', claim_id: claimId });
      return { code: 1, outcome: 'no_claim' };
    }
    const t = currentGrant(vc.claim, this.cfg.role);
    if (!t) {
      this.log.error({ event_type: 'grant_not_for_me', claim_id: claimId, status: vc.claim.status });
      return { code: 1, outcome: 'not_granted' };
    }
    this.metrics.grants.inc({ claim_type: t, via: 'claim' });
    this.current = this.executor.execute({ claimId, claimType: t }, this.abort.signal);
    const outcome = await this.current;
    this.current = undefined;
    return { code: outcome === 'error' ? 1 : 0, outcome };
  }

  /**
   * Stops bidding at once, lets a running tool finish for up to `graceMs`, then kills it (its grant stays
   * open on the blackboard and is run again after a restart).
   */
  async stop(graceMs = this.cfg.shutdownGraceMs): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.halted.abort();
    this.log.info({ event_type: 'pup_stopping', busy: this.current !== undefined, grace_ms: graceMs });
    // The queue first: the executor takes nothing new, and bids waiting for room give up (the grants
    // queued stay open on the blackboard, for this pup's next start or another pup).
    this.queue.close();
    await this.watcher?.stop();
    const running = this.current;
    if (running) {
      const ac = new AbortController();
      const finished = await Promise.race([
        running.then(() => true),
        sleep(graceMs, false, { signal: ac.signal }).catch(() => false),
      ]);
      ac.abort();
      if (!finished) {
        this.log.warn({ event_type: 'shutdown_grace_expired', grace_ms: graceMs });
        this.abort.abort();
        await running;
      }
    }
    await this.loop;
    await this.inbox?.close(); // drains: running claims finish within the grace period or are released
    await this.model?.close();
    this.custom?.stop();
    await this.probe?.close();
    await this.bb.close();
    this.log.info({ event_type: 'pup_stopped' });
  }
}
