import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  Watch,
} from '@kubernetes/client-node';
import { backoffMs } from '../../common/backoff.ts';
import { errorMessage } from '../../common/errors.ts';
import type { Logger } from '../../common/logger.ts';
import { type KubeClient, type KubeObject, resourcePath } from './kube.ts';

export type InformerEvent = 'add' | 'update' | 'delete';
export type InformerHandler = (event: InformerEvent, obj: KubeObject) => void;

export interface InformerOptions {
  kind: string;
  /** Namespaces to watch; empty = all. */
  namespaces?: string[];
  labelSelector?: string;
  /** Full relist this often (catches anything a broken watch missed); 0 = never. */
  resyncMs?: number;
}

/**
 * Drops `metadata.managedFields` before an object enters the cache (controller-runtime's
 * TransformStripManagedFields): with server-side apply they are often the larger part of an
 * object, and no reconciler reads them.
 */
export function stripManagedFields<T>(obj: T): T {
  const meta = (obj as { metadata?: { managedFields?: unknown } } | undefined)?.metadata;
  if (meta && 'managedFields' in meta) delete meta.managedFields;
  return obj;
}

/**
 * client-node's Watch aborts a watch after 30 s without data and ListWatch reconnects at once: on
 * a quiet kind that is two watch requests a minute per informer, forever. With bookmarks asked for
 * (the API server sends one about every minute, which also keeps the resourceVersion fresh, so a
 * reconnect rarely needs a relist) the inactivity limit can be longer and still catch dead
 * connections.
 */
const WATCH_INACTIVITY_MS = 180_000;

/** A Watch with bookmarks, a longer inactivity limit, and events stripped of managedFields. */
class StrippingWatch extends Watch {
  constructor(kc: KubeConfig) {
    super(kc);
    // A private field of client-node's Watch; were it renamed, the 30 s default would stay.
    Object.assign(this, { requestTimeoutMs: WATCH_INACTIVITY_MS });
  }

  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(
      path,
      { ...queryParams, allowWatchBookmarks: true },
      (phase: string, apiObj: unknown, watchObj?: unknown) =>
        callback(phase, stripManagedFields(apiObj), watchObj),
      done,
    );
  }
}

/** client-go's reflector backoff: 800 ms doubling to 30 s, forgotten after 2 min without a failure. */
export const WATCH_BACKOFF = { baseMs: 800, maxMs: 30_000, resetMs: 120_000 } as const;

/** Failures of one watch in a row, and when the watch was last restarted after one (ms). */
export interface WatchFailures {
  count: number;
  restartAt: number;
}

/**
 * The pause before restarting a broken watch (pure). Only time without a failure resets it, never a
 * reconnect: a watch the API server refuses (403 after its RoleBinding went) fails right after each
 * start, and must not be retried at the first delay for ever.
 */
export function nextWatchRetry(
  prev: WatchFailures,
  now: number,
  b: { baseMs: number; maxMs: number; resetMs: number } = WATCH_BACKOFF,
): { delayMs: number; next: WatchFailures } {
  const count = now - prev.restartAt > b.resetMs ? 0 : prev.count;
  const delayMs = backoffMs(count, { ...b, jitter: 'none' });
  return { delayMs, next: { count: count + 1, restartAt: now + delayMs } };
}

/**
 * A cache of one kind, kept by client-node's ListWatch (list, then watch from the resourceVersion;
 * relist on 410). What ListWatch does not do, this does: restart after any other watch error with
 * backoff (ListWatch just stops), and a periodic full relist that emits deletes it missed.
 */
export class Informer {
  readonly kind: string;
  readonly #client: KubeClient;
  readonly #opts: InformerOptions;
  readonly #log: Logger;
  readonly #handlers: InformerHandler[] = [];
  #watches = new Map<string, ListWatch<KubernetesObject>>();
  #stopped = true;
  #synced = false;
  /** Per namespace watched: a namespace being deleted (403s) does not slow the others' restarts. */
  #failures = new Map<string, WatchFailures>();
  #resyncTimer?: NodeJS.Timeout;
  #relisting = false;
  #restartTimers = new Set<NodeJS.Timeout>();
  lastEventAt = 0;
  restarts = 0;

  constructor(client: KubeClient, opts: InformerOptions, log: Logger) {
    this.kind = opts.kind;
    this.#client = client;
    this.#opts = opts;
    this.#log = log.child({ informer: opts.kind });
  }

  on(handler: InformerHandler): void {
    this.#handlers.push(handler);
  }

  get synced(): boolean {
    return this.#synced;
  }

  get<T extends KubeObject = KubeObject>(namespace: string, name: string): T | undefined {
    const w = this.#watches.get(this.#scopeOf(namespace));
    return w?.get(name, namespace) as T | undefined;
  }

  list<T extends KubeObject = KubeObject>(namespace?: string): T[] {
    if (namespace !== undefined) {
      const w = this.#watches.get(this.#scopeOf(namespace));
      return (w?.list(namespace) ?? []) as T[];
    }
    return [...this.#watches.values()].flatMap((w) => w.list() as T[]);
  }

  async start(): Promise<void> {
    this.#stopped = false;
    const scopes = this.#opts.namespaces?.length ? this.#opts.namespaces : [''];
    await Promise.all(scopes.map((s) => this.#startScope(s)));
    this.#synced = true;
    if (this.#opts.resyncMs) {
      // Jitter so informers of many kinds do not relist together.
      const every = this.#opts.resyncMs * (0.9 + Math.random() * 0.2);
      this.#resyncTimer = setInterval(() => void this.#relistAll(), every);
      this.#resyncTimer.unref();
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#resyncTimer);
    for (const t of this.#restartTimers) clearTimeout(t);
    this.#restartTimers.clear();
    await Promise.all([...this.#watches.values()].map((w) => w.stop()));
  }

  #scopeOf(namespace: string): string {
    return this.#opts.namespaces?.length ? namespace : '';
  }

  #emit(event: InformerEvent, obj: KubernetesObject): void {
    this.lastEventAt = Date.now();
    for (const h of this.#handlers) h(event, obj as unknown as KubeObject);
  }

  #newWatch(scope: string): ListWatch<KubernetesObject> {
    const { kind, labelSelector } = this.#opts;
    const ns = scope || undefined;
    const listFn = async () => {
      const list = await this.#client.list(kind, ns, { labelSelector });
      for (const o of list.items) stripManagedFields(o);
      return list as unknown as KubernetesListObject<KubernetesObject>;
    };
    const lw = new ListWatch<KubernetesObject>(
      resourcePath(kind, ns),
      new StrippingWatch(this.#client.kc),
      listFn,
      false,
      labelSelector,
    );
    lw.on('add', (o) => this.#emit('add', o));
    lw.on('update', (o) => this.#emit('update', o));
    lw.on('delete', (o) => this.#emit('delete', o));
    lw.on('error', (err: unknown) => this.#onError(scope, lw, err));
    return lw;
  }

  async #startScope(scope: string): Promise<void> {
    const lw = this.#newWatch(scope);
    this.#watches.set(scope, lw);
    await lw.start();
  }

  #onError(scope: string, lw: ListWatch<KubernetesObject>, err: unknown): void {
    if (this.#stopped || this.#watches.get(scope) !== lw) return;
    const { delayMs: delay, next } = nextWatchRetry(
      this.#failures.get(scope) ?? { count: 0, restartAt: 0 },
      Date.now(),
    );
    this.#failures.set(scope, next);
    this.#log.warn(
      {
        event_type: 'watch_error',
        ...(scope ? { namespace: scope } : {}),
        error: errorMessage(err),
        retry_ms: delay,
        failures: next.count,
      },
      'watch broke; restarting',
    );
    const t = setTimeout(() => {
      this.#restartTimers.delete(t);
      if (this.#stopped) return;
      this.restarts++;
      // start() resumes from the last resourceVersion, or relists if it is gone (410).
      lw.start().catch((e: unknown) => this.#onError(scope, lw, e));
    }, delay);
    t.unref();
    this.#restartTimers.add(t);
  }

  async #relistAll(): Promise<void> {
    // One relist at a time (a slow list must not pile up behind the timer).
    if (this.#relisting) return;
    this.#relisting = true;
    try {
      for (const [scope, old] of [...this.#watches]) {
        if (this.#stopped) return;
        const fresh = this.#newWatch(scope);
        // Swapped in only once it has listed: readers see the old cache until then, never an empty
        // one (a reconcile that read an empty cache rendered pods without the objects it needs).
        // What the old cache had before the list and the list lacks was deleted while we were not
        // looking. Read before: an object made while the list ran is in the old cache and may not be in
        // the fresh one yet (its watch event still coming), and is no delete.
        const before = old.list();
        try {
          await fresh.start();
        } catch (e) {
          await fresh.stop().catch(() => undefined);
          this.#log.warn({ event_type: 'relist_failed', error: String(e) }, 'relist failed');
          continue;
        }
        if (this.#stopped || this.#watches.get(scope) !== old) {
          await fresh.stop();
          continue;
        }
        this.#watches.set(scope, fresh);
        await old.stop().catch(() => undefined);
        for (const o of before)
          if (!fresh.get(o.metadata?.name ?? '', o.metadata?.namespace)) this.#emit('delete', o);
      }
    } finally {
      this.#relisting = false;
    }
  }
}
