import type { Logger } from '../common/logger.ts';
import type { BacklogReader, ClaimSource } from './autoscale/backlog.ts';
import { Autoscaler } from './autoscale/loop.ts';
import type { WakeupSource } from './autoscale/wakeup.ts';
import { reconcileAgent } from './controllers/agent.ts';
import type { ControllerContext } from './controllers/context.ts';
import { reconcileHolt } from './controllers/holt.ts';
import { RegistrySync, type RegistryWriter } from './controllers/registry.ts';
import { holtOf, keyOf } from './controllers/resources.ts';
import { reconcileWorkerPool } from './controllers/workerpool.ts';
import { Cache } from './runtime/cache.ts';
import { EventRecorder } from './runtime/events.ts';
import { Informer } from './runtime/informer.ts';
import type { KubeClient, KubeObject } from './runtime/kube.ts';
import { createMetrics, type OperatorMetrics } from './runtime/metrics.ts';
import { type ReconcileResult, WorkQueue } from './runtime/queue.ts';
import { MANAGED_SELECTOR } from './specs/meta.ts';

export interface OperatorOptions {
  client: KubeClient;
  log: Logger;
  registry: RegistryWriter;
  /** Namespaces to watch; empty = all. */
  namespaces?: string[];
  runtimeImage?: string;
  backlog?: BacklogReader;
  claims?: ClaimSource;
  wakeups?: WakeupSource;
  /** Identity in Events and the Lease (the pod name). */
  identity?: string;
  concurrency?: number;
  pollMs?: number;
  autoscalePollMs?: number;
  resyncMs?: number;
}

export const DEFAULT_RUNTIME_IMAGE = 'ghcr.io/holt-k8s/holt-runtime:0.1.0';
const OWNED_KINDS = [
  'Deployment',
  'StatefulSet',
  'Service',
  'Secret',
  'ServiceAccount',
  'PersistentVolumeClaim',
  'PodDisruptionBudget',
  'NetworkPolicy',
  'Job',
] as const;
const PRIMARY = ['Holt', 'Agent', 'WorkerPool'] as const;
type Primary = (typeof PRIMARY)[number];

/**
 * The operator: informers on every replica (a warm cache for a quick failover), and, while
 * leading, one work queue per kind and the autoscaler. Events map to keys: a primary to itself,
 * an owned object to its controller owner, an Agent also to its Holt (registry, counts) and its
 * pools, a Holt to its Agents and pools (they read its spec).
 */
export class Operator {
  readonly cache = new Cache();
  readonly metrics: OperatorMetrics;
  readonly queues: Record<Primary, WorkQueue>;
  readonly autoscaler?: Autoscaler;
  readonly ctx: ControllerContext;
  readonly #o: OperatorOptions;
  #leading = false;
  #resync?: NodeJS.Timeout;

  constructor(o: OperatorOptions) {
    this.#o = o;
    const events = new EventRecorder(o.client, o.identity ?? 'holt-operator', o.log);
    this.ctx = {
      client: o.client,
      cache: this.cache,
      events,
      log: o.log,
      runtimeImage: o.runtimeImage ?? DEFAULT_RUNTIME_IMAGE,
      registry: new RegistrySync(o.registry, this.cache, o.log),
      claims: o.claims,
      backlog: o.backlog,
      pollMs: o.pollMs ?? 5_000,
    };
    const reconcilers: Record<Primary, (ctx: ControllerContext, key: string) => Promise<ReconcileResult>> = {
      Holt: reconcileHolt,
      Agent: reconcileAgent,
      WorkerPool: reconcileWorkerPool,
    };
    this.metrics = createMetrics(o.client, () => ({
      holt: this.queues.Holt.depth(),
      agent: this.queues.Agent.depth(),
      workerpool: this.queues.WorkerPool.depth(),
    }));
    const mkQueue = (kind: Primary) => {
      const controller = kind.toLowerCase();
      return new WorkQueue(
        async (key) => {
          const end = this.metrics.reconcileSeconds.startTimer({ controller });
          try {
            return await reconcilers[kind](this.ctx, key);
          } finally {
            end();
          }
        },
        {
          concurrency: o.concurrency ?? 4,
          baseDelayMs: 100,
          onResult: (key, result, error) => {
            this.metrics.reconciles.inc({ controller, result });
            if (error)
              o.log.warn(
                { event_type: 'reconcile_error', controller, key, error: String(error) },
                'reconcile failed; will retry',
              );
          },
        },
      );
    };
    this.queues = { Holt: mkQueue('Holt'), Agent: mkQueue('Agent'), WorkerPool: mkQueue('WorkerPool') };
    if (o.backlog)
      this.autoscaler = new Autoscaler({
        client: o.client,
        cache: this.cache,
        backlog: o.backlog,
        wakeups: o.wakeups,
        events,
        metrics: this.metrics,
        log: o.log,
        pollMs: o.autoscalePollMs,
      });
    const ns = o.namespaces ?? [];
    const resyncMs = o.resyncMs ?? 10 * 60_000;
    for (const kind of PRIMARY)
      this.cache.add(new Informer(o.client, { kind, namespaces: ns, resyncMs }, o.log));
    for (const kind of OWNED_KINDS)
      this.cache.add(
        new Informer(o.client, { kind, namespaces: ns, labelSelector: MANAGED_SELECTOR, resyncMs }, o.log),
      );
    for (const inf of this.cache.informers.values()) inf.on((_e, obj) => this.#route(obj));
  }

  get leading(): boolean {
    return this.#leading;
  }

  #enqueue(kind: Primary, namespace: string | undefined, name: string): void {
    this.queues[kind].add(keyOf(namespace, name));
  }

  #route(obj: KubeObject): void {
    const ns = obj.metadata.namespace;
    const kind = obj.kind as Primary;
    if (PRIMARY.includes(kind)) this.#enqueue(kind, ns, obj.metadata.name);
    if (kind === 'Agent' || kind === 'WorkerPool') {
      const h = holtOf(obj);
      if (h) this.#enqueue('Holt', ns, h);
    }
    if (kind === 'Agent') {
      // Pools of this agent's role read its prompts/LLM settings.
      for (const p of this.cache.list('WorkerPool', ns))
        if (holtOf(p) === holtOf(obj)) this.#enqueue('WorkerPool', ns, p.metadata.name);
    }
    if (kind === 'Holt') {
      for (const k of ['Agent', 'WorkerPool'] as const)
        for (const o of this.cache.list(k, ns))
          if (holtOf(o) === obj.metadata.name) this.#enqueue(k, ns, o.metadata.name);
    }
    if (kind === 'WorkerPool') {
      this.autoscaler?.notify(obj);
      // An Agent reports its pool's readiness.
      for (const r of obj.metadata.ownerReferences ?? [])
        if (r.controller && r.kind === 'Agent') this.#enqueue('Agent', ns, r.name);
    }
    if (!PRIMARY.includes(kind)) {
      for (const r of obj.metadata.ownerReferences ?? [])
        if (r.controller && PRIMARY.includes(r.kind as Primary)) this.#enqueue(r.kind as Primary, ns, r.name);
    }
  }

  /** Fills the caches (every replica). Resolves once every informer has listed. */
  async startInformers(): Promise<void> {
    await Promise.all([...this.cache.informers.values()].map((i) => i.start()));
  }

  /** Starts reconciling (the leader only): every primary object is queued once, then on events. */
  startControllers(): void {
    if (this.#leading) return;
    this.#leading = true;
    this.metrics.isLeader.set(1);
    for (const kind of PRIMARY) {
      for (const o of this.cache.list(kind)) this.#enqueue(kind, o.metadata.namespace, o.metadata.name);
      this.queues[kind].start();
    }
    this.autoscaler?.start();
    // A periodic requeue of every primary catches drift that produced no event.
    this.#resync = setInterval(
      () => {
        for (const kind of PRIMARY)
          for (const o of this.cache.list(kind)) this.#enqueue(kind, o.metadata.namespace, o.metadata.name);
      },
      this.#o.resyncMs ?? 10 * 60_000,
    );
    this.#resync.unref();
  }

  async stopControllers(): Promise<void> {
    if (!this.#leading) return;
    this.#leading = false;
    this.metrics.isLeader.set(0);
    clearInterval(this.#resync);
    await Promise.all([...Object.values(this.queues).map((q) => q.stop()), this.autoscaler?.stop()]);
  }

  /** Resolves when every queue is idle (tests: "the operator has settled"). */
  async idle(): Promise<void> {
    await Promise.all(Object.values(this.queues).map((q) => q.idle()));
  }

  async stop(): Promise<void> {
    await this.stopControllers();
    await Promise.all([...this.cache.informers.values()].map((i) => i.stop()));
    await this.#o.registry.close?.();
    await this.#o.backlog?.close?.();
    await this.#o.wakeups?.close?.();
  }
}
