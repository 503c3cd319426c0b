import { Agent, type RequestOptions, request } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

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
  Deployment: { group: 'apps', version: 'v1', plural: 'deployments', namespaced: true },
  StatefulSet: { group: 'apps', version: 'v1', plural: 'statefulsets', namespaced: true },
  Service: { group: '', version: 'v1', plural: 'services', namespaced: true },
  Secret: { group: '', version: 'v1', plural: 'secrets', namespaced: true },
  ServiceAccount: { group: '', version: 'v1', plural: 'serviceaccounts', namespaced: true },
  PersistentVolumeClaim: { group: '', version: 'v1', plural: 'persistentvolumeclaims', namespaced: true },
  Pod: { group: '', version: 'v1', plural: 'pods', namespaced: true },
  Namespace: { group: '', version: 'v1', plural: 'namespaces', namespaced: false },
  PodDisruptionBudget: { group: 'policy', version: 'v1', plural: 'poddisruptionbudgets', namespaced: true },
  NetworkPolicy: { group: 'networking.k8s.io', version: 'v1', plural: 'networkpolicies', namespaced: true },
  Job: { group: 'batch', version: 'v1', plural: 'jobs', namespaced: true },
  Lease: { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespaced: true },
  Event: { group: 'events.k8s.io', version: 'v1', plural: 'events', namespaced: true },
  // Optional: only when a Holt asks for it, and only where the Prometheus Operator's CRDs exist.
  PodMonitor: { group: 'monitoring.coreos.com', version: 'v1', plural: 'podmonitors', namespaced: true },
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

/** `/apis/apps/v1/namespaces/ns/deployments[/name[/sub]]`; namespace undefined = all namespaces. */
export function resourcePath(kind: string, namespace?: string, name?: string, subresource?: string): string {
  const r = resourceOf(kind);
  let p = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  if (r.namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`;
  p += `/${r.plural}`;
  if (name) p += `/${encodeURIComponent(name)}`;
  if (subresource) p += `/${subresource}`;
  return p;
}

export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  constructor(status: number, reason: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
  }
}

export const isNotFound = (e: unknown) => e instanceof ApiError && e.status === 404;
export const isConflict = (e: unknown) => e instanceof ApiError && e.status === 409;

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

/**
 * A small JSON client over the KubeConfig: one keep-alive agent, the paths of RESOURCES, and a
 * counter of every request by verb (tests and the bench prove "no writes in steady state" with it).
 */
export class KubeClient {
  readonly kc: KubeConfig;
  readonly counts = new Map<Verb, number>();
  onRequest?: (r: RequestRecord) => void;
  /** Called with the object a successful write returned (its new resourceVersion). */
  readonly writeListeners: ((written: KubeObject) => void)[] = [];
  #inFlight = 0;
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 16 });
  readonly #server: URL;

  constructor(kc: KubeConfig) {
    this.kc = kc;
    const server = kc.getCurrentCluster()?.server;
    if (!server) throw new Error('kubeconfig has no current cluster');
    this.#server = new URL(server);
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
    this.#agent.destroy();
  }

  async get<T extends KubeObject = KubeObject>(
    kind: string,
    namespace: string | undefined,
    name: string,
    opts: CallOptions = {},
  ) {
    try {
      return (await this.request(
        'get',
        'GET',
        resourcePath(kind, namespace, name),
        undefined,
        undefined,
        opts,
      )) as T;
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
    const q = new URLSearchParams();
    if (opts.labelSelector) q.set('labelSelector', opts.labelSelector);
    if (opts.fieldSelector) q.set('fieldSelector', opts.fieldSelector);
    const qs = q.size ? `?${q}` : '';
    const list = (await this.request('list', 'GET', resourcePath(kind, namespace) + qs)) as {
      apiVersion: string;
      metadata: { resourceVersion?: string };
      items: T[];
    };
    // Items of a list carry no apiVersion/kind; restore them so cached objects look like gets.
    const apiVersion = apiVersionOf(kind);
    for (const i of list.items) {
      i.apiVersion = apiVersion;
      i.kind = kind;
    }
    return { ...list, kind: `${kind}List` };
  }

  create<T extends KubeObject>(obj: T, fieldManager?: string, opts: CallOptions = {}): Promise<T> {
    const q = fieldManager ? `?fieldManager=${encodeURIComponent(fieldManager)}` : '';
    return this.request(
      'create',
      'POST',
      resourcePath(obj.kind, obj.metadata.namespace) + q,
      obj,
      undefined,
      opts,
    ) as Promise<T>;
  }

  update<T extends KubeObject>(obj: T, fieldManager?: string, opts: CallOptions = {}): Promise<T> {
    const q = fieldManager ? `?fieldManager=${encodeURIComponent(fieldManager)}` : '';
    return this.request(
      'update',
      'PUT',
      resourcePath(obj.kind, obj.metadata.namespace, obj.metadata.name) + q,
      obj,
      undefined,
      opts,
    ) as Promise<T>;
  }

  /** Server-side apply (`application/apply-patch+yaml`; JSON is valid YAML). */
  apply<T extends KubeObject>(obj: T, opts: ApplyOptions): Promise<T> {
    const q = new URLSearchParams({ fieldManager: opts.fieldManager });
    if (opts.force) q.set('force', 'true');
    const path = resourcePath(obj.kind, obj.metadata.namespace, obj.metadata.name, opts.subresource);
    return this.request('apply', 'PATCH', `${path}?${q}`, obj, 'application/apply-patch+yaml') as Promise<T>;
  }

  /** JSON merge patch (finalizers, pod annotations). */
  mergePatch(
    kind: string,
    namespace: string | undefined,
    name: string,
    patch: unknown,
    fieldManager?: string,
  ): Promise<KubeObject> {
    const q = fieldManager ? `?fieldManager=${encodeURIComponent(fieldManager)}` : '';
    return this.request(
      'patch',
      'PATCH',
      resourcePath(kind, namespace, name) + q,
      patch,
      'application/merge-patch+json',
    ) as Promise<KubeObject>;
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
    const body = {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      propagationPolicy,
      ...(uid ? { preconditions: { uid } } : {}),
    };
    try {
      await this.request('delete', 'DELETE', resourcePath(kind, namespace, name), body);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  async raw(path: string): Promise<string> {
    return (await this.send('get', 'GET', path, undefined, undefined, true)) as string;
  }

  request(
    verb: Verb,
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
    opts: CallOptions = {},
  ): Promise<unknown> {
    return this.send(verb, method, path, body, contentType, false, opts.signal);
  }

  private async send(
    verb: Verb,
    method: string,
    path: string,
    body: unknown,
    contentType: string | undefined,
    text: boolean,
    signal?: AbortSignal,
  ): Promise<unknown> {
    this.counts.set(verb, (this.counts.get(verb) ?? 0) + 1);
    this.onRequest?.({ verb, path });
    this.#inFlight++;
    try {
      const res = await this.#send(method, path, body, contentType, text, signal);
      if (WRITE_VERBS.has(verb) && this.writeListeners.length && isKubeObject(res))
        for (const l of this.writeListeners) l(res);
      return res;
    } finally {
      this.#inFlight--;
    }
  }

  async #send(
    method: string,
    path: string,
    body: unknown,
    contentType: string | undefined,
    text: boolean,
    signal?: AbortSignal,
  ): Promise<unknown> {
    signal?.throwIfAborted();
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const opts: RequestOptions = {
      protocol: this.#server.protocol,
      hostname: this.#server.hostname,
      port: this.#server.port || 443,
      path: this.#server.pathname.replace(/\/$/, '') + path,
      method,
      headers: {
        accept: 'application/json',
        ...(payload !== undefined
          ? {
              'content-type': contentType ?? 'application/json',
              'content-length': Buffer.byteLength(payload),
            }
          : {}),
      },
      timeout: 30_000,
    };
    await this.kc.applyToHTTPSOptions(opts);
    opts.agent = this.#agent;
    return new Promise((resolve, reject) => {
      const req = request(opts, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const s = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            if (text) return resolve(s);
            try {
              resolve(s ? JSON.parse(s) : undefined);
            } catch (e) {
              reject(e);
            }
            return;
          }
          let reason = 'Unknown';
          let message = s.slice(0, 500);
          try {
            const st = JSON.parse(s) as { reason?: string; message?: string };
            reason = st.reason ?? reason;
            message = st.message ?? message;
          } catch {
            // not a Status body
          }
          reject(new ApiError(status, reason, `${method} ${path}: ${status} ${message}`));
        });
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timeout`)));
      const onAbort = () => {
        const e = new Error(`${method} ${path}: aborted (${String(signal?.reason ?? 'aborted')})`);
        req.destroy(e);
        reject(e);
      };
      if (signal) {
        signal.addEventListener('abort', onAbort, { once: true });
        req.once('close', () => signal.removeEventListener('abort', onAbort));
      }
      req.on('error', reject);
      req.end(payload);
    });
  }
}

function isKubeObject(v: unknown): v is KubeObject {
  if (!v || typeof v !== 'object') return false;
  const o = v as { kind?: unknown; metadata?: { name?: unknown; resourceVersion?: unknown } };
  return (
    typeof o.kind === 'string' &&
    typeof o.metadata?.name === 'string' &&
    typeof o.metadata.resourceVersion === 'string'
  );
}
