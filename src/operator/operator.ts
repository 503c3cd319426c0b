import { DEFAULT_RUNTIME_IMAGE } from '../api/common.ts';
import type { WorkerExit } from '../blackboard/worker-exits.ts';
import type { Logger } from '../common/logger.ts';
import { inSpan } from '../telemetry/spans.ts';
import type { BacklogReader, ClaimSource } from './autoscale/backlog.ts';
import { Autoscaler } from './autoscale/loop.ts';
import type { WakeupSource } from './autoscale/wakeup.ts';
import { reconcileAgent } from './controllers/agent.ts';
import type { HoltFiguresReader } from './controllers/agentfigures.ts';
import { AgentImages } from './controllers/agentimages.ts';
import { ClaimBells } from './controllers/claimbells.ts';
import type { ControllerContext } from './controllers/context.ts';
import { reconcileHolt } from './controllers/holt.ts';
import { type HoltRef, RegistrySync, type RegistryWriter } from './controllers/registry.ts';
import { holtOf, keyOf, splitKey } from './controllers/resources.ts';
import { reconcileToolServer } from './controllers/toolserver.ts';
import { WorkerExitWatch } from './controllers/workerexits.ts';
import { reconcileWorkerPool } from './controllers/workerpool.ts';
import { Cache } from './kube/cache.ts';
import { EventRecorder } from './kube/events.ts';
import { Informer, type InformerEvent } from './kube/informer.ts';
import type { KubeClient, KubeObject } from './kube/kube.ts';
import { createMetrics, type OperatorMetrics } from './kube/metrics.ts';
import { type ReconcileResult, WorkQueue } from './kube/queue.ts';
import { secretRefusal } from './secrets.ts';
import { MANAGED_SELECTOR } from './specs/meta.ts';
import { DEFAULT_CLUSTER_CIDRS, type NetworkSettings } from './specs/networkpolicy.ts';

export interface OperatorOptions {
  client: KubeClient;
  log: Logger;
  registry: RegistryWriter;
  /** Namespaces to watch; empty = all. */
  namespaces?: string[];
  runtimeImage?: string;
  backlog?: BacklogReader;
  claims?: ClaimSource;
  /** Claims in flight and budget use for Agent status (polled every `statusPollMs`). */
  runtime?: HoltFiguresReader;
  wakeups?: WakeupSource;
  /** Identity in Events and the Lease (the pod name). */
  identity?: string;
  concurrency?: number;
  pollMs?: number;
  /** Re-read interval of each Agent's runtime values (default 10 s). */
  statusPollMs?: number;
  /** Defaults: the namespace `default` and the private ranges (DEFAULT_CLUSTER_CIDRS). */
  network?: Partial<NetworkSettings>;
  autoscalePollMs?: number;
  resyncMs?: number;
  /** How often a ToolServer's tools are read again (default 60 s). */
  toolServerRefreshMs?: number;
  /** Reports a claim-running pod's dead pup to its Holt (WorkerFailure); unset: not watched. */
  reportWorkerExit?: (holt: HoltRef, e: WorkerExit) => Promise<void>;
  /** Resolves a trace collector's Service name the operator may not read (default: its own DNS). */
  resolveHost?: (host: string) => Promise<string>;
}

/** The part of an Agent's spec that names its ToolServers (read unparsed, to route events). */
type AgentRefs = { llm?: { toolServers?: { name?: string }[] } } | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Whether resourceVersion `a` is older than `b`. Versions are opaque to clients in general, but
 * kube-apiserver's are etcd revisions (integers); anything else counts as not older.
 */
function olderVersion(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) < BigInt(b);
}

export { DEFAULT_RUNTIME_IMAGE };

// Not Secrets: watching them would read every Secret of the namespace; store Secrets are read by name.
const OWNED_KINDS = [
  'Deployment',
  'StatefulSet',
  'Service',
  'ServiceAccount',
  'PersistentVolumeClaim',
  'PodDisruptionBudget',
  'NetworkPolicy',
  'Job',
] as const;
const PRIMARY = ['Holt', 'Agent', 'WorkerPool', 'ToolServer'] as const;
type Primary = (typeof PRIMARY)[number];

/**
 * The operator: informers on every replica (a warm cache for a quick failover), and, while
 * leading, one work queue per kind, the autoscaler and the fresh_per_call doorbells. Events map to
 * keys: a primary to itself, an owned object to its controller owner, an Agent also to its Holt
 * (registry, counts) and its pools, a Holt to its Agents and pools (they read its spec).
 */
export class Operator {
  readonly cache = new Cache();
  readonly metrics: OperatorMetrics;
  readonly queues: Record<Primary, WorkQueue>;
  readonly autoscaler?: Autoscaler;
  /** Doorbells of fresh_per_call Agents (with claims and wakeups both given). */
  readonly claimBells?: ClaimBells;
  /** Dead pups of worker and claim Job pods, reported to their Holts (leader only). */
  readonly workerExits?: WorkerExitWatch;
  /** role → image digest per Holt, from the agents' pods (Holt's agent_images). */
  readonly agentImages: AgentImages;
  readonly #pods: Informer;
  readonly ctx: ControllerContext;
  readonly #o: OperatorOptions;
  #leading = false;
  #resync?: NodeJS.Timeout;
  /** Objects written by the operator whose new resourceVersion the cache has not seen yet. */
  readonly #unseen = new Map<string, string>();
  /** uid/generation/deletion of each Holt and Agent last seen (see #specChanged). */
  readonly #generations = new Map<string, string>();

  constructor(o: OperatorOptions) {
    this.#o = o;
    // Every Secret the operator reads is one its Holts and Agents name (RBAC cannot say which).
    o.client.secretGuard = (ns, name) => secretRefusal(this.cache, ns, name);
    // A new digest for a role rewrites its Holt's registry (the Holt's reconcile writes it).
    this.agentImages = new AgentImages((h) => {
      if (this.#leading) this.queues.Holt.add(keyOf(h.namespace, h.name));
    });
    const events = new EventRecorder(o.client, o.identity ?? 'holt-operator', o.log);
    this.ctx = {
      client: o.client,
      cache: this.cache,
      events,
      log: o.log,
      runtimeImage: o.runtimeImage ?? DEFAULT_RUNTIME_IMAGE,
      registry: new RegistrySync(o.registry, this.cache, o.log, this.agentImages),
      claims: o.claims,
      backlog: o.backlog,
      pollMs: o.pollMs ?? 5_000,
      runtime: o.runtime,
      statusPollMs: o.statusPollMs ?? 10_000,
      network: {
        operatorNamespace: o.network?.operatorNamespace ?? 'default',
        clusterCidrs: o.network?.clusterCidrs ?? DEFAULT_CLUSTER_CIDRS,
      },
      toolServerRefreshMs: o.toolServerRefreshMs,
      resolveHost: o.resolveHost,
    };
    const reconcilers: Record<Primary, (ctx: ControllerContext, key: string) => Promise<ReconcileResult>> = {
      Holt: reconcileHolt,
      Agent: reconcileAgent,
      WorkerPool: reconcileWorkerPool,
      ToolServer: reconcileToolServer,
    };
    this.metrics = createMetrics(o.client, () => ({
      holt: this.queues.Holt.depth(),
      agent: this.queues.Agent.depth(),
      workerpool: this.queues.WorkerPool.depth(),
      toolserver: this.queues.ToolServer.depth(),
    }));
    const mkQueue = (kind: Primary) => {
      const controller = kind.toLowerCase();
      return new WorkQueue(
        async (key) => {
          const end = this.metrics.reconcileSeconds.startTimer({ controller });
          const [namespace, name] = splitKey(key);
          try {
            return await inSpan(
              `reconcile ${kind}`,
              { attributes: { 'k8s.namespace.name': namespace, 'holt.kind': kind, 'holt.name': name } },
              async (span) => {
                const r = await reconcilers[kind](this.ctx, key);
                if (r?.requeueAfterMs !== undefined)
                  span.setAttribute('holt.requeue_after_ms', r.requeueAfterMs);
                return r;
              },
            );
          } finally {
            end();
          }
        },
        {
          concurrency: o.concurrency ?? 4,
          baseDelayMs: 100,
          onSlow: (key, ms) =>
            o.log.warn(
              { event_type: 'reconcile_slow', controller, key, after_ms: ms },
              'reconcile still running; its slot goes to the next key (it runs again when this one ends)',
            ),
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
    this.queues = {
      Holt: mkQueue('Holt'),
      Agent: mkQueue('Agent'),
      WorkerPool: mkQueue('WorkerPool'),
      ToolServer: mkQueue('ToolServer'),
    };
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
    if (o.claims && o.wakeups)
      this.claimBells = new ClaimBells(o.wakeups, (key) => this.queues.Agent.add(key));
    const ns = o.namespaces ?? [];
    if (o.reportWorkerExit)
      this.workerExits = new WorkerExitWatch({ client: o.client, log: o.log, report: o.reportWorkerExit });
    // Agents' and workers' pods (every replica, like the caches): their images and their pups' deaths.
    this.#pods = new Informer(
      o.client,
      { kind: 'Pod', namespaces: ns, labelSelector: `${MANAGED_SELECTOR},holt.io/role`, resyncMs: 60_000 },
      o.log,
    );
    this.#pods.on((event, pod) => {
      this.agentImages.onPod(event, pod);
      this.workerExits?.onPod(event, pod);
    });
    const resyncMs = o.resyncMs ?? 10 * 60_000;
    for (const kind of PRIMARY)
      this.cache.add(new Informer(o.client, { kind, namespaces: ns, resyncMs }, o.log));
    for (const kind of OWNED_KINDS)
      this.cache.add(
        new Informer(o.client, { kind, namespaces: ns, labelSelector: MANAGED_SELECTOR, resyncMs }, o.log),
      );
    for (const inf of this.cache.informers.values())
      inf.on((e, obj) => {
        this.#seen(e, obj);
        this.#route(e, obj);
      });
    o.client.writeListeners.push((w) => this.#wrote(w));
  }

  get leading(): boolean {
    return this.#leading;
  }

  #enqueue(kind: Primary, namespace: string | undefined, name: string): void {
    this.queues[kind].add(keyOf(namespace, name));
  }

  /**
   * Whether the spec of a Holt or Agent changed with this event (add, delete, new generation).
   * Others read only their spec, so their status updates (every status write we make) need not
   * fan out to every Agent and pool of a Holt.
   */
  #specChanged(event: InformerEvent, obj: KubeObject): boolean {
    const key = `${obj.kind}/${keyOf(obj.metadata.namespace, obj.metadata.name)}`;
    if (event === 'delete') {
      this.#generations.delete(key);
      return true;
    }
    const gen = `${obj.metadata.uid}/${obj.metadata.generation}/${obj.metadata.deletionTimestamp ?? ''}`;
    if (this.#generations.get(key) === gen) return false;
    this.#generations.set(key, gen);
    return true;
  }

  #route(event: InformerEvent, obj: KubeObject): void {
    const ns = obj.metadata.namespace;
    const kind = obj.kind as Primary;
    if (PRIMARY.includes(kind)) this.#enqueue(kind, ns, obj.metadata.name);
    const specChanged =
      (kind === 'Holt' || kind === 'Agent' || kind === 'WorkerPool') && this.#specChanged(event, obj);
    if (kind === 'Agent' || kind === 'WorkerPool') {
      // The Holt's status counts ready agents and its registry lists them: every change matters.
      const h = holtOf(obj);
      if (h) this.#enqueue('Holt', ns, h);
    }
    if (kind === 'Agent' && specChanged && this.#leading)
      this.claimBells?.sync(keyOf(ns, obj.metadata.name), event === 'delete' ? undefined : obj);
    if (kind === 'Agent' && specChanged) {
      // Pools of this agent's role read its prompts/LLM settings.
      for (const p of this.cache.list('WorkerPool', ns))
        if (holtOf(p) === holtOf(obj)) this.#enqueue('WorkerPool', ns, p.metadata.name);
    }
    if (kind === 'Holt' && specChanged) {
      for (const k of ['Agent', 'WorkerPool'] as const)
        for (const o of this.cache.list(k, ns))
          if (holtOf(o) === obj.metadata.name) this.#enqueue(k, ns, o.metadata.name);
    }
    if (kind === 'WorkerPool') {
      // Not on status changes: the autoscaler writes the pool's status on every tick, and each write
      // would start the next tick at once (a read failure then spun ~80 ticks a second).
      if (specChanged) this.autoscaler?.notify(obj);
      // An Agent reports its pool's readiness.
      for (const r of obj.metadata.ownerReferences ?? [])
        if (r.controller && r.kind === 'Agent') this.#enqueue('Agent', ns, r.name);
    }
    if (!PRIMARY.includes(kind)) {
      for (const r of obj.metadata.ownerReferences ?? [])
        if (r.controller && PRIMARY.includes(r.kind as Primary)) this.#enqueue(r.kind as Primary, ns, r.name);
    }
    // An Agent's pods are given its ToolServers' addresses and its status their tools.
    const ts =
      kind === 'ToolServer'
        ? obj.metadata.name
        : obj.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'ToolServer')?.name;
    if (ts)
      for (const a of this.cache.list('Agent', ns))
        if (((a.spec as AgentRefs)?.llm?.toolServers ?? []).some((r) => r?.name === ts))
          this.#enqueue('Agent', ns, a.metadata.name);
    if ((obj.kind as string) === 'Service' && event !== 'update') {
      // A Holt's Service address (fixed for its life) goes into the /etc/hosts of its agents' pods that
      // go without DNS: they are rewritten when it comes or goes.
      const holt = obj.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'Holt')?.name;
      if (holt)
        for (const k of ['Agent', 'WorkerPool'] as const)
          for (const o of this.cache.list(k, ns))
            if (holtOf(o) === holt) this.#enqueue(k, ns, o.metadata.name);
    }
  }

  /** Fills the caches (every replica). Resolves once every informer has listed. */
  async startInformers(): Promise<void> {
    await Promise.all([...this.cache.informers.values(), this.#pods].map((i) => i.start()));
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
    if (this.workerExits) this.workerExits.running = true;
    for (const a of this.cache.list('Agent'))
      this.claimBells?.sync(keyOf(a.metadata.namespace, a.metadata.name), a);
    // A periodic requeue of every primary catches drift that produced no event.
    this.#resync = setInterval(() => this.resyncAll(), this.#o.resyncMs ?? 10 * 60_000);
    this.#resync.unref();
  }

  /** Queues every primary object (and, in builtin mode, an autoscaler tick of every pool). */
  resyncAll(): void {
    for (const kind of PRIMARY)
      for (const o of this.cache.list(kind)) this.#enqueue(kind, o.metadata.namespace, o.metadata.name);
    for (const p of this.cache.list('WorkerPool')) this.autoscaler?.notify(p);
  }

  async stopControllers(): Promise<void> {
    if (!this.#leading) return;
    this.#leading = false;
    this.metrics.isLeader.set(0);
    clearInterval(this.#resync);
    this.claimBells?.clear();
    await Promise.all([...Object.values(this.queues).map((q) => q.stop()), this.autoscaler?.stop()]);
    if (this.workerExits) this.workerExits.running = false;
  }

  /** Resolves when every queue is idle (nothing running or queued; timed re-checks aside). */
  async idle(): Promise<void> {
    await Promise.all(
      [...Object.values(this.queues), ...(this.autoscaler ? [this.autoscaler.queue] : [])].map((q) =>
        q.idle(),
      ),
    );
  }

  /**
   * Resolves once the operator is quiescent: every queue idle, no request in flight, and the
   * caches hold every object the operator itself wrote (so the watch events of its own writes have
   * been delivered and routed), with no request made since the last check. What is then left are
   * timed re-checks and outside changes. Tests and the bench measure "no writes" from here.
   */
  async settled(): Promise<void> {
    const queues = [...Object.values(this.queues), ...(this.autoscaler ? [this.autoscaler.queue] : [])];
    const client = this.#o.client;
    for (;;) {
      const before = client.total();
      await this.idle();
      while (client.inFlight > 0 || this.#unseen.size > 0) await sleep(10);
      // One more turn of the event loop: handlers of events just delivered have run.
      await sleep(0);
      if (client.total() === before && client.inFlight === 0 && queues.every((q) => q.isIdle())) return;
    }
  }

  /** Remembers an object the operator wrote until its informer delivers that version (see settled). */
  #wrote(o: KubeObject): void {
    if (!this.cache.informers.has(o.kind)) return;
    const key = `${o.kind}/${keyOf(o.metadata.namespace, o.metadata.name)}`;
    const have = this.cache.get(o.kind, o.metadata.namespace ?? '', o.metadata.name);
    if (have && !olderVersion(have.metadata.resourceVersion, o.metadata.resourceVersion)) return;
    this.#unseen.set(key, o.metadata.resourceVersion ?? '');
  }

  #seen(event: InformerEvent, o: KubeObject): void {
    if (this.#unseen.size === 0) return;
    const key = `${o.kind}/${keyOf(o.metadata.namespace, o.metadata.name)}`;
    const want = this.#unseen.get(key);
    if (want === undefined) return;
    if (event === 'delete' || !olderVersion(o.metadata.resourceVersion, want)) this.#unseen.delete(key);
  }

  async stop(): Promise<void> {
    await this.stopControllers();
    await Promise.all([...this.cache.informers.values(), this.#pods].map((i) => i.stop()));
    await this.#o.registry.close?.();
    await this.#o.runtime?.close?.();
    await this.#o.backlog?.close?.();
    await this.#o.wakeups?.close?.();
  }
}
