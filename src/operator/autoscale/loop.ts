import type { Logger } from '../../common/logger.ts';
import { keyOf, parsePool, splitKey } from '../controllers/resources.ts';
import type { Cache } from '../kube/cache.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { KubeClient, KubeObject } from '../kube/kube.ts';
import type { OperatorMetrics } from '../kube/metrics.ts';
import { type ReconcileResult, WorkQueue } from '../kube/queue.ts';
import { nowIso, writeStatus } from '../kube/status.ts';
import { poolSelector } from '../specs/workerpool.ts';
import type { BacklogReader, BacklogTarget } from './backlog.ts';
import { type BacklogRead, decide, initialState, persistedLastActive, type ScaleState } from './decide.ts';
import type { WakeupSource } from './wakeup.ts';

/** The field manager of spec.replicas in builtin mode: nobody else's fields are touched. */
export const AUTOSCALER_MANAGER = 'holt-autoscaler';
export const DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';

export interface AutoscalerOptions {
  client: KubeClient;
  cache: Cache;
  backlog: BacklogReader;
  wakeups?: WakeupSource;
  events: EventRecorder;
  metrics?: OperatorMetrics;
  log: Logger;
  pollMs?: number;
  readTimeoutMs?: number;
  now?: () => number;
}

interface PoolState {
  scale: ScaleState;
  unsubscribe?: () => void;
  target: string;
  /**
   * The last scale this leader made: the informer's copy of status can lag behind our own status
   * write, and an apply that left the field out would remove it (server-side apply drops owned fields).
   */
  lastScaleTime?: string;
}

const withTimeout = <T>(p: Promise<T>, ms: number) =>
  Promise.race([
    p,
    new Promise<never>((_, rej) => setTimeout(() => rej(new Error('backlog read timed out')), ms).unref()),
  ]);

/**
 * The built-in autoscaler (leader only): per WorkerPool in builtin mode, read the backlog every
 * poll interval and at once on a doorbell, decide with KEDA's rules, write spec.replicas under
 * its own field manager, and keep lastActiveTime in status so a new leader keeps the cooldown.
 * Pools in external mode are never written: their HPA/KEDA owns spec.replicas.
 */
export class Autoscaler {
  readonly #o: Required<Omit<AutoscalerOptions, 'wakeups' | 'metrics'>> &
    Pick<AutoscalerOptions, 'wakeups' | 'metrics'>;
  readonly #pools = new Map<string, PoolState>();
  readonly queue: WorkQueue;

  constructor(opts: AutoscalerOptions) {
    // `?? ` per field, not a spread over defaults: an option passed as undefined (the operator passes
    // its own optional autoscalePollMs through) would replace the default with undefined, and a tick
    // returning `requeueAfterMs: undefined` is never run again: pools then moved only on events.
    this.#o = {
      ...opts,
      pollMs: opts.pollMs ?? 10_000,
      readTimeoutMs: opts.readTimeoutMs ?? 5_000,
      now: opts.now ?? Date.now,
    };
    this.queue = new WorkQueue((k) => this.tick(k), {
      concurrency: 4,
      baseDelayMs: 500,
      maxDelayMs: this.#o.pollMs,
    });
  }

  /** Called for every WorkerPool event (from the informer). */
  notify(pool: KubeObject): void {
    this.queue.add(keyOf(pool.metadata.namespace, pool.metadata.name));
  }

  start(): void {
    for (const p of this.#o.cache.list('WorkerPool')) this.notify(p);
    this.queue.start();
  }

  async stop(): Promise<void> {
    await this.queue.stop();
    for (const s of this.#pools.values()) s.unsubscribe?.();
    this.#pools.clear();
  }

  #forget(key: string): void {
    this.#pools.get(key)?.unsubscribe?.();
    this.#pools.delete(key);
  }

  async tick(key: string): Promise<ReconcileResult> {
    const [ns, name] = splitKey(key);
    const pool = this.#o.cache.get('WorkerPool', ns, name);
    const parsed = pool && !pool.metadata.deletionTimestamp ? parsePool(pool) : undefined;
    if (!pool || !parsed?.ok || parsed.spec.autoscaling.mode !== 'builtin') {
      this.#forget(key);
      return undefined;
    }
    const spec = parsed.spec;
    const t: BacklogTarget = { namespace: ns, holt: spec.holt, target: spec.target };
    const status = (pool.status ?? {}) as {
      lastActiveTime?: string;
      lastScaleTime?: string;
      backlog?: number;
    };
    const parseTime = (t: string | undefined) => {
      const ms = t ? Date.parse(t) : Number.NaN;
      return Number.isNaN(ms) ? undefined : ms;
    };
    let st = this.#pools.get(key);
    if (!st || st.target !== spec.target) {
      this.#forget(key);
      // A new leader picks lastActiveTime up from status: the cooldown survives failover.
      st = { scale: initialState(parseTime(status.lastActiveTime)), target: spec.target };
      st.unsubscribe = this.#o.wakeups?.subscribe(t, () => this.queue.add(key));
      this.#pools.set(key, st);
    }
    let read: BacklogRead;
    let busy: string[] = [];
    try {
      const b = await withTimeout(this.#o.backlog.depth(t), this.#o.readTimeoutMs);
      read = { ok: true, pending: b.pending, inFlight: b.inFlight };
      busy = b.busyWorkers ?? [];
    } catch (e) {
      read = { ok: false };
      this.#o.metrics?.autoscalerErrors.inc();
      this.#o.log.warn(
        { event_type: 'backlog_read_failed', pool: key, error: String(e) },
        'cannot read backlog',
      );
    }
    const now = this.#o.now();
    const current = spec.replicas ?? spec.autoscaling.minReplicas;
    const d = decide(spec.autoscaling, current, read, st.scale, now);
    st.scale = d.state;
    this.#o.metrics?.autoscalerDecisions.inc({ reason: d.reason });
    if (d.backlog !== undefined) this.#o.metrics?.poolBacklog.set({ namespace: ns, pool: name }, d.backlog);
    this.#o.metrics?.poolDesired.set({ namespace: ns, pool: name }, d.replicas);
    // Every field this manager owns is sent on every apply (server-side apply removes owned
    // fields an apply leaves out), with its stored value when it has no reason to move.
    const lastActive = persistedLastActive(
      parseTime(status.lastActiveTime),
      d.state,
      d.active,
      spec.autoscaling.cooldownSeconds,
    );
    const backlog = read.ok ? read.pending : status.backlog;
    const lastScale = [status.lastScaleTime, st.lastScaleTime]
      .filter((x): x is string => x !== undefined)
      .sort()
      .at(-1);
    const patch: Record<string, unknown> = {
      desiredReplicas: d.replicas,
      backlogReadFailures: d.state.failures,
      ...(backlog !== undefined ? { backlog } : {}),
      ...(lastActive !== undefined ? { lastActiveTime: nowIso(lastActive) } : {}),
      ...(lastScale ? { lastScaleTime: lastScale } : {}),
    };
    if (d.replicas !== spec.replicas) {
      if (d.replicas < current) await this.#markIdle(ns, name, busy);
      await this.#o.client.apply(
        {
          apiVersion: pool.apiVersion,
          kind: 'WorkerPool',
          metadata: { name, namespace: ns },
          spec: { replicas: d.replicas },
        },
        { fieldManager: AUTOSCALER_MANAGER, force: true },
      );
      patch.lastScaleTime = nowIso(now);
      st.lastScaleTime = patch.lastScaleTime as string;
      this.#o.events.emit(
        pool,
        'Normal',
        'Scaled',
        'Scale',
        `replicas ${current} -> ${d.replicas} (${d.reason}, backlog ${d.backlog ?? 'unknown'})`,
      );
      this.#o.log.info(
        { event_type: 'pool_scaled', pool: key, from: current, to: d.replicas, reason: d.reason },
        'scaled',
      );
    }
    await writeStatus(this.#o.client, pool, patch, AUTOSCALER_MANAGER);
    // The owning Agent's claimsInFlight is the Agent reconciler's (one definition for every mode,
    // the open grants the orchestrator publishes: controllers/agentfigures.ts), not the inbox's rows.
    return { requeueAfterMs: this.#o.pollMs };
  }

  /**
   * Before a scale-in: idle workers get deletion cost 0 and busy ones (holding a claim lease) a
   * high cost, so the ReplicaSet removes idle pods first. Only changed annotations are written.
   */
  async #markIdle(ns: string, pool: string, busy: string[]): Promise<void> {
    const pods = await this.#o.client.list('Pod', ns, { labelSelector: poolSelector(pool) });
    const busySet = new Set(busy);
    await Promise.all(
      pods.items.map(async (p) => {
        const cost = busySet.has(p.metadata.name) ? '1000' : '0';
        if (p.metadata.annotations?.[DELETION_COST] === cost) return;
        await this.#o.client
          .mergePatch(
            'Pod',
            ns,
            p.metadata.name,
            { metadata: { annotations: { [DELETION_COST]: cost } } },
            AUTOSCALER_MANAGER,
          )
          .catch(() => undefined);
      }),
    );
  }
}
