import type { KubeConfig, KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import { ApiError, type CallContext, ObjectApi, requestMiddleware, withCall } from './object-api.ts';

export { ApiError };

/** The parts of any Kubernetes object the operator touches generically. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  deletionTimestamp?: string;
  creationTimestamp?: string;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

interface ResourceInfo {
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
}

/**
 * Every kind the operator reads or writes, so no discovery round trips are needed. CRDs are ours;
 * the rest are stable built-in APIs.
 */
export const RESOURCES: Record<string, ResourceInfo> = {
  Holt: { group: 'holt.io', version: 'v1alpha1', plural: 'holts', namespaced: true },
  Agent: { group: 'holt.io', version: 'v1alpha1', plural: 'agents', namespaced: true },
  WorkerPool: { group: 'holt.io', version: 'v1alpha1', plural: 'workerpools', namespaced: true },
  ToolServer: { group: 'holt.io', version: 'v1alpha1', plural: 'toolservers', namespaced: true },
  Deployment: { group: 'apps', version: 'v1', plural: 'deployments', namespaced: true },
  StatefulSet: { group: 'apps', version: 'v1', plural: 'statefulsets', namespaced: true },
  Service: { group: '', version: 'v1', plural: 'services', namespaced: true },
  Secret: { group: '', version: 'v1', plural: 'secrets', namespaced: true },
  ServiceAccount: { group: '', version: 'v1', plural: 'serviceaccounts', namespaced: true },
  PersistentVolumeClaim: { group: '', version: 'v1', plural: 'persistentvolumeclaims', namespaced: true },
  Pod: { group: '', version: 'v1', plural: 'pods', namespaced: true },
  Namespace: { group: '', version: 'v1', plural: 'namespaces', namespaced: false },
  // Read by name only (get), to tell a Holt's volume bound to a node that is down (lostvolumes.ts).
  PersistentVolume: { group: '', version: 'v1', plural: 'persistentvolumes', namespaced: false },
  Node: { group: '', version: 'v1', plural: 'nodes', namespaced: false },
  PodDisruptionBudget: { group: 'policy', version: 'v1', plural: 'poddisruptionbudgets', namespaced: true },
  NetworkPolicy: { group: 'networking.k8s.io', version: 'v1', plural: 'networkpolicies', namespaced: true },
  Job: { group: 'batch', version: 'v1', plural: 'jobs', namespaced: true },
  Lease: { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespaced: true },
  Event: { group: 'events.k8s.io', version: 'v1', plural: 'events', namespaced: true },
  // Optional: only when a Holt asks for it, and only where the Prometheus Operator's CRDs exist.
  PodMonitor: { group: 'monitoring.coreos.com', version: 'v1', plural: 'podmonitors', namespaced: true },
  // The living agents' ingress, exposed when a Holt asks (HTTPRoute only where the Gateway API is installed).
  Ingress: { group: 'networking.k8s.io', version: 'v1', plural: 'ingresses', namespaced: true },
  HTTPRoute: { group: 'gateway.networking.k8s.io', version: 'v1', plural: 'httproutes', namespaced: true },
};

export function apiVersionOf(kind: string): string {
  const r = resourceOf(kind);
  return r.group ? `${r.group}/${r.version}` : r.version;
}

function resourceOf(kind: string): ResourceInfo {
  const r = RESOURCES[kind];
  if (!r) throw new Error(`unknown kind ${kind}`);
  return r;
}

/** `/apis/apps/v1/namespaces/ns/deployments`, what a watch follows; namespace undefined = all namespaces. */
export function resourcePath(kind: string, namespace?: string): string {
  const r = resourceOf(kind);
  let p = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  if (r.namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`;
  return `${p}/${r.plural}`;
}

export const isNotFound = (e: unknown) => e instanceof ApiError && e.status === 404;
export const isConflict = (e: unknown) => e instanceof ApiError && e.status === 409;
export const isForbidden = (e: unknown) => e instanceof ApiError && e.status === 403;

export type Verb = 'get' | 'list' | 'create' | 'update' | 'patch' | 'apply' | 'delete';
const WRITE_VERBS: ReadonlySet<Verb> = new Set(['create', 'update', 'patch', 'apply', 'delete']);

export interface RequestRecord {
  verb: Verb;
  path: string;
}

/** Per-request options: `signal` aborts the request (e.g. a deadline shorter than the socket timeout). */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface ApplyOptions {
  fieldManager: string;
  force?: boolean;
  subresource?: string;
}

/** Which object a call is about: any kind, the operator's or not (others are found by discovery). */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}

export interface PatchOptions {
  fieldManager?: string;
  /** `status`, `scale`...; the object itself when absent. */
  subresource?: string;
}

const MERGE_PATCH = 'application/merge-patch+json';
const APPLY_PATCH = 'application/apply-patch+yaml';

/** An ObjectRef for one of RESOURCES. */
export function refOf(kind: string, namespace: string | undefined, name: string): ObjectRef {
  return { apiVersion: apiVersionOf(kind), kind, metadata: { name, ...(namespace ? { namespace } : {}) } };
}

/** A Secret read the client's guard refused: no request was sent. */
export class SecretRefused extends Error {
  constructor(reason: string) {
    super(`Secret read refused: ${reason}`);
    this.name = 'SecretRefused';
  }
}

/**
 * The operator's Kubernetes client: client-node's KubernetesObjectApi (see ObjectApi) under a thin
 * layer that counts every request by verb (tests and the bench prove "no writes in steady state"
 * with it), knows how many are in flight, passes each call's abort signal, and tells listeners of
 * every object a write returned.
 */
export class KubeClient {
  readonly kc: KubeConfig;
  readonly counts = new Map<Verb, number>();
  onRequest?: (r: RequestRecord) => void;
  /**
   * Asked before every Secret read: why to refuse it, or undefined. The operator's (src/operator/
   * secrets.ts) lets through only the Secrets its Holts and Agents name. Secrets are never listed.
   */
  secretGuard?: (namespace: string | undefined, name: string) => string | undefined;
  /** Called with the object a successful write returned (its new resourceVersion). */
  readonly writeListeners: ((written: KubeObject) => void)[] = [];
  #inFlight = 0;
  readonly #api: ObjectApi;
  readonly #pool: ReturnType<typeof requestMiddleware>;

  constructor(kc: KubeConfig) {
    this.kc = kc;
    this.#pool = requestMiddleware();
    this.#api = new ObjectApi(kc, KNOWN, this.#pool.middleware);
  }

  /** Requests that change something (create, update, patch, apply, delete). */
  writes(): number {
    let n = 0;
    for (const [v, c] of this.counts) if (WRITE_VERBS.has(v)) n += c;
    return n;
  }

  /** Requests sent and not yet answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  total(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c;
    return n;
  }

  close(): void {
    void this.#pool.close();
  }

  async get<T extends KubeObject = KubeObject>(
    kind: string,
    namespace: string | undefined,
    name: string,
    opts: CallOptions = {},
  ): Promise<T | undefined> {
    if (kind === 'Secret' && this.secretGuard) {
      const why = this.secretGuard(namespace, name);
      if (why) throw new SecretRefused(why);
    }
    const ref = refOf(kind, namespace, name);
    const header = ref as unknown as Parameters<KubernetesObjectApi['read']>[0];
    try {
      return await this.send('get', ref, () => this.#api.read(header), { signal: opts.signal });
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  async list<T extends KubeObject = KubeObject>(
    kind: string,
    namespace?: string,
    opts: { labelSelector?: string; fieldSelector?: string } = {},
  ): Promise<{ apiVersion: string; kind: string; metadata: { resourceVersion?: string }; items: T[] }> {
    if (kind === 'Secret' && this.secretGuard)
      throw new SecretRefused('Secrets are read by name, never listed');
    const apiVersion = apiVersionOf(kind);
    const ref = { apiVersion, kind, metadata: { name: '', namespace } };
    const { fieldSelector, labelSelector } = opts;
    const list = await this.send<{ metadata?: { resourceVersion?: string }; items: T[] }>('list', ref, () =>
      this.#api.list(apiVersion, kind, namespace, ...NO_OPTS, fieldSelector, labelSelector),
    );
    // Items of a list carry no apiVersion/kind; restore them so cached objects look like gets.
    for (const i of list.items) {
      i.apiVersion = apiVersion;
      i.kind = kind;
    }
    return {
      apiVersion,
      kind: `${kind}List`,
      metadata: { resourceVersion: list.metadata?.resourceVersion },
      items: list.items,
    };
  }

  create<T extends KubeObject>(obj: T, fieldManager?: string, opts: CallOptions = {}): Promise<T> {
    return this.send('create', obj, () => this.#api.create(wire(obj), undefined, undefined, fieldManager), {
      signal: opts.signal,
      body: obj,
    });
  }

  update<T extends KubeObject>(obj: T, fieldManager?: string, opts: CallOptions = {}): Promise<T> {
    return this.send('update', obj, () => this.#api.replace(wire(obj), undefined, undefined, fieldManager), {
      signal: opts.signal,
      body: obj,
    });
  }

  /** Server-side apply, of the object or of a subresource (`status`). */
  apply<T extends KubeObject>(obj: T, opts: ApplyOptions): Promise<T> {
    const { fieldManager, force, subresource } = opts;
    return this.send(
      'apply',
      obj,
      () =>
        subresource
          ? this.#api.patchSubresource(wire(obj), subresource, APPLY_PATCH, { fieldManager, force })
          : this.#api.patch(wire(obj), undefined, undefined, fieldManager, force, APPLY_PATCH),
      { body: obj },
    );
  }

  /** JSON merge patch of one of RESOURCES (finalizers, pod annotations). */
  mergePatch(
    kind: string,
    namespace: string | undefined,
    name: string,
    patch: Record<string, unknown>,
    fieldManager?: string,
  ): Promise<KubeObject> {
    return this.patch(refOf(kind, namespace, name), patch, { fieldManager });
  }

  /** JSON merge patch of any object, or of its subresource. */
  patch<T extends KubeObject = KubeObject>(
    ref: ObjectRef,
    patch: Record<string, unknown>,
    opts: PatchOptions = {},
  ): Promise<T> {
    const { fieldManager, subresource } = opts;
    return this.send(
      'patch',
      ref,
      () =>
        subresource
          ? this.#api.patchSubresource(wire(ref), subresource, MERGE_PATCH, { fieldManager })
          : this.#api.patch(wire(ref), undefined, undefined, fieldManager, undefined, MERGE_PATCH),
      { body: patch },
    );
  }

  /**
   * Deletes; an object already gone is success. Background propagation lets the GC collect children;
   * Orphan leaves them running (ownerless, for a new owner to adopt).
   */
  async delete(
    kind: string,
    namespace: string | undefined,
    name: string,
    uid?: string,
    propagationPolicy: 'Background' | 'Orphan' = 'Background',
  ): Promise<void> {
    const ref = refOf(kind, namespace, name);
    const body = { propagationPolicy, ...(uid ? { preconditions: { uid } } : {}) };
    try {
      await this.send('delete', ref, () =>
        this.#api.delete(wire(ref), undefined, undefined, undefined, undefined, propagationPolicy, body),
      );
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  /**
   * Every request passes here: counted, in flight, with its abort signal and the body to send
   * (see ObjectApi). Replies are the API server's JSON. Tests may override it to stall requests.
   */
  protected async send<T>(
    verb: Verb,
    ref: ObjectRef,
    call: () => Promise<unknown>,
    ctx: CallContext = {},
  ): Promise<T> {
    this.counts.set(verb, (this.counts.get(verb) ?? 0) + 1);
    this.onRequest?.({ verb, path: describeRef(ref) });
    this.#inFlight++;
    try {
      ctx.signal?.throwIfAborted();
      const res = await withCall(ctx, call);
      if (WRITE_VERBS.has(verb) && this.writeListeners.length && isKubeObject(res))
        for (const l of this.writeListeners) l(res);
      return res as T;
    } finally {
      this.#inFlight--;
    }
  }
}

/** RESOURCES as discovery would describe them, for ObjectApi's discovery cache. */
const KNOWN = Object.entries(RESOURCES).map(([kind, r]) => ({
  apiVersion: apiVersionOf(kind),
  kind,
  plural: r.plural,
  namespaced: r.namespaced,
}));

/** pretty, exact, export: the list options KubernetesObjectApi asks for before the selectors. */
const NO_OPTS = [undefined, undefined, undefined] as const;

/** `apps/v1 Deployment ns/name`, for logs and the request hook. */
function describeRef(ref: ObjectRef): string {
  const m = ref.metadata;
  return `${ref.apiVersion} ${ref.kind} ${m.namespace ? `${m.namespace}/` : ''}${m.name}`;
}

/** client-node types timestamps as Date; the JSON the operator sends and reads has strings. */
const wire = (o: ObjectRef): KubernetesObject => o as unknown as KubernetesObject;

function isKubeObject(v: unknown): v is KubeObject {
  if (!v || typeof v !== 'object') return false;
  const o = v as { kind?: unknown; metadata?: { name?: unknown; resourceVersion?: unknown } };
  return (
    typeof o.kind === 'string' &&
    typeof o.metadata?.name === 'string' &&
    typeof o.metadata.resourceVersion === 'string'
  );
}
