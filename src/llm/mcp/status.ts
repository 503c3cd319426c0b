import type { Redis } from 'ioredis';
import type { McpServerReport, McpState, McpStatusReport } from '../../blackboard/mcp-status.ts';
import { writeMcpStatus } from '../../blackboard/mcp-status.ts';
import { backoffMs } from '../../common/backoff.ts';
import { errorMessage } from '../../common/errors.ts';
import type { Logger } from '../../common/logger.ts';
import { classify } from './results.ts';

/** The most tool names one server's report carries (the Agent's status is an etcd object). */
const MAX_TOOLS = 200;

const errno = (e: unknown): string | undefined => {
  const x = e as { code?: unknown; cause?: { code?: unknown } } | undefined;
  const c = typeof x?.code === 'string' ? x.code : x?.cause?.code;
  return typeof c === 'string' && /^E[A-Z]+$/.test(c) ? c : undefined;
};

/**
 * Why a server is down, in fixed words per cause (pure): the status must not churn with each retry's
 * message, and must not carry what a server said (it could echo a header). The pup's log keeps the full
 * reason (`mcp_server_unavailable`). `refused`: it will not work until someone changes something.
 */
export function describeFailure(e: unknown, timeoutSeconds: number): { state: McpState; reason: string } {
  const cls = classify(e);
  const msg = errorMessage(e);
  const code = (e as { code?: unknown } | undefined)?.code;
  if (cls === 'auth')
    return { state: 'refused', reason: 'the server refused our credentials (HTTP 401/403)' };
  if (cls === 'config') {
    const header = /^header [\w-]+: the variable \w+ is not set$/.exec(msg);
    if (header) return { state: 'refused', reason: header[0] };
    if (/the tool runner cannot/.test(msg))
      return { state: 'refused', reason: 'the tool runner cannot run stdio servers' };
    if (/cannot start/.test(msg)) {
      const n = errno(e) ?? /\b(E[A-Z]{3,})\b/.exec(msg)?.[1];
      return { state: 'refused', reason: `its command cannot be started${n ? ` (${n})` : ''}` };
    }
    return {
      state: 'refused',
      reason: `the server refused the session${typeof code === 'number' ? ` (HTTP ${code})` : ''}: a wrong url, path or method`,
    };
  }
  if (/^no session within/.test(msg))
    return { state: 'unreachable', reason: `no session within ${timeoutSeconds} s (it hangs or is slow)` };
  if (/^the session closed/.test(msg))
    return {
      state: 'unreachable',
      reason: 'the session closed (the server ended or the connection was lost)',
    };
  if (code === -32000)
    return { state: 'unreachable', reason: 'the server closed the connection before the session started' };
  if (code === -32001) return { state: 'unreachable', reason: 'the server did not answer in time' };
  if (typeof code === 'number' && code >= 400)
    return { state: 'unreachable', reason: `the server answered HTTP ${code}` };
  const n =
    errno(e) ?? /\b(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH)\b/.exec(msg)?.[1];
  if (n) return { state: 'unreachable', reason: `cannot connect (${n})` };
  return { state: 'unreachable', reason: 'cannot connect (the pup log says why: mcp_server_unavailable)' };
}

/** What a connection shows of itself to the status (McpServerConnection has these). */
export interface ServerView {
  spec: { name: string; timeoutSeconds: number };
  ready: boolean;
  tools: { name: string }[];
  failure: unknown;
}

/** One server's report as of now, without its time (pure). */
export function serverState(s: ServerView): Omit<McpServerReport, 'since_ms'> {
  const name = s.spec.name;
  if (s.ready) return { name, state: 'connected', tools: s.tools.slice(0, MAX_TOOLS).map((t) => t.name) };
  if (s.failure === undefined) return { name, state: 'connecting', tools: [] };
  return { name, tools: [], ...describeFailure(s.failure, s.spec.timeoutSeconds) };
}

/**
 * Publishes the hub's servers to `mcp_status:{role}` when what it shows changed (a server up or down,
 * a new tool list), never per call: writes are serialized, a change during a write is written after
 * it, the same view twice is one write. A failed write is tried again at the next change, and after a
 * backoff (5 s doubling to 5 min) unless Redis refused the key (NOPERM: an external Redis whose ACL
 * predates it), which is logged once.
 */
export class McpStatusPublisher {
  readonly #servers: () => ServerView[];
  readonly #write: (r: McpStatusReport) => Promise<void>;
  readonly #log: Logger;
  readonly #since = new Map<string, { state: McpState; at: number }>();
  #last = '';
  #running: Promise<void> | undefined;
  #again = false;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;
  #failures = 0;
  #refusedLogged = false;
  /** Writes done: tests and the bench read it. */
  writes = 0;

  constructor(
    servers: () => ServerView[],
    target: { redis: Redis; instance: string; role: string } | ((r: McpStatusReport) => Promise<void>),
    log: Logger,
  ) {
    this.#servers = servers;
    this.#write =
      typeof target === 'function'
        ? target
        : (r) => writeMcpStatus(target.redis, target.instance, target.role, r);
    this.#log = log;
  }

  /** Something may have changed: publish it if so. */
  changed(): void {
    if (this.#closed) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#flush().finally(() => {
      this.#running = undefined;
      if (this.#again) {
        this.#again = false;
        this.changed();
      }
    });
  }

  /** Resolves once nothing is being written. */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async #flush(): Promise<void> {
    const now = Date.now();
    const servers = this.#servers().map((s) => {
      const v = serverState(s);
      const had = this.#since.get(v.name);
      const at = had && had.state === v.state ? had.at : now;
      this.#since.set(v.name, { state: v.state, at });
      return { ...v, since_ms: at };
    });
    const body = JSON.stringify(servers);
    if (body === this.#last) return;
    try {
      await this.#write({ updated_at_ms: now, servers });
      this.#last = body;
      this.writes++;
      this.#failures = 0;
      clearTimeout(this.#retry);
    } catch (e) {
      const refused = /NOPERM/.test(errorMessage(e));
      if (!refused || !this.#refusedLogged)
        this.#log.warn({ event_type: 'mcp_status_unpublished', error: errorMessage(e) });
      this.#refusedLogged ||= refused;
      clearTimeout(this.#retry);
      if (refused) return;
      const delay = backoffMs(this.#failures++, { baseMs: 5_000, maxMs: 300_000, jitter: 'none' });
      this.#retry = setTimeout(() => this.changed(), delay);
      this.#retry.unref();
    }
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
  }
}
