import { AsyncLocalStorage } from 'node:async_hooks';
import {
  createConfiguration,
  HttpMethod,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  type Middleware,
  type RequestContext,
  type ResponseContext,
  ServerConfiguration,
  type V1APIResourceList,
} from '@kubernetes/client-node';

/** The API server's answer to a failed request, with its HTTP status and the Status reason. */
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

export interface KnownResource {
  apiVersion: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

/** What a call gives its request: an abort signal, and the JSON body to send as built. */
export interface CallContext {
  signal?: AbortSignal;
  body?: unknown;
}

const callContext = new AsyncLocalStorage<CallContext>();

/** Runs `fn` so that its request is aborted by `call.signal` and carries `call.body` verbatim. */
export function withCall<T>(call: CallContext, fn: () => Promise<T>): Promise<T> {
  return callContext.run(call, fn);
}

/**
 * client-node's KubernetesObjectApi with three changes:
 * - replies stay the API server's JSON (no typed models: timestamps stay strings, unknown fields
 *   stay), so a written object and a watched one look alike in the caches;
 * - the kinds the operator knows are put in the discovery cache up front (no discovery round trips);
 * - a patch can address a subresource (`status`), which KubernetesObjectApi cannot.
 */
export class ObjectApi extends KubernetesObjectApi {
  constructor(kc: KubeConfig, known: readonly KnownResource[], middleware: Middleware) {
    const server = kc.getCurrentCluster()?.server;
    if (!server) throw new Error('kubeconfig has no current cluster');
    super(
      createConfiguration({
        baseServer: new ServerConfiguration(server, {}),
        authMethods: { default: kc },
        promiseMiddleware: [middleware],
      }),
    );
    this.setDefaultNamespace(kc);
    const cache = this.apiVersionResourceCache;
    for (const r of known) {
      cache[r.apiVersion] ??= {
        apiVersion: 'v1',
        kind: 'APIResourceList',
        groupVersion: r.apiVersion,
        resources: [],
      } as V1APIResourceList;
      cache[r.apiVersion]?.resources.push({
        name: r.plural,
        kind: r.kind,
        namespaced: r.namespaced,
        singularName: r.kind.toLowerCase(),
        verbs: [],
      });
    }
  }

  /** PATCH `<object>/<subresource>` (SSA or merge); the body is the call's (see withCall). */
  async patchSubresource(
    target: KubernetesObject,
    subresource: string,
    contentType: string,
    query: { fieldManager?: string; force?: boolean } = {},
  ): Promise<unknown> {
    const path = `${await this.specUriPath({ ...target, metadata: { ...target.metadata } }, 'patch')}/${subresource}`;
    const ctx = this.configuration.baseServer.makeRequestContext(path, HttpMethod.PATCH);
    ctx.setHeaderParam('Accept', 'application/json');
    ctx.setHeaderParam('Content-Type', contentType);
    if (query.fieldManager) ctx.setQueryParam('fieldManager', query.fieldManager);
    if (query.force) ctx.setQueryParam('force', 'true');
    return this.requestPromise(ctx);
  }

  protected override async processResponse<T extends KubernetesObject>(
    response: ResponseContext,
  ): Promise<T> {
    const text = await response.body.text();
    const status = response.httpStatusCode;
    if (status >= 200 && status < 300) return (text ? JSON.parse(text) : undefined) as T;
    let reason = 'Unknown';
    let message = text.slice(0, 500);
    try {
      const st = JSON.parse(text) as { reason?: string; message?: string };
      reason = st.reason ?? reason;
      message = st.message ?? message;
    } catch {
      // not a Status body
    }
    throw new ApiError(status, reason, `${status} ${reason}: ${message}`);
  }
}

/**
 * Per request: the body as the caller built it, the abort signal of the call (see withCall), and
 * one keep-alive connection pool for the client.
 *
 * The body: KubernetesObjectApi passes built-in kinds through client-node's typed models, which
 * drop every field whose JSON name differs from the model's property (a NetworkPolicy rule's
 * `from` is `_from` there) and any field the models do not know yet. The operator builds plain
 * API JSON, so that JSON is what is sent.
 *
 * The connection pool: client-node builds a new undici Agent for every request, so every request
 * would open a new TLS connection; the first request's Agent is kept and given to the rest (the TLS
 * settings come from the same kubeconfig; bearer tokens travel in headers, refreshed per request).
 */
export function requestMiddleware(): { middleware: Middleware; close(): Promise<void> } {
  let shared: ReturnType<RequestContext['getDispatcher']>;
  return {
    middleware: {
      pre: async (ctx) => {
        const call = callContext.getStore();
        if (call?.signal) ctx.setSignal(call.signal);
        // Not on a discovery GET the call may need first.
        if (call?.body !== undefined && ctx.getHttpMethod() !== HttpMethod.GET)
          ctx.setBody(JSON.stringify(call.body));
        const own = ctx.getDispatcher();
        // A new Agent never used for a connection holds nothing: it is left to the GC.
        if (own) {
          shared ??= own;
          ctx.setDispatcher(shared);
        }
        return ctx;
      },
      post: async (ctx) => ctx,
    },
    close: async () => {
      await shared?.close().catch(() => undefined);
    },
  };
}
