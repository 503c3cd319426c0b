import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolResultSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { McpServer } from '../../api/agent.ts';
import type { ErrorClass } from '../../blackboard/error-class.ts';
import { backoffMs } from '../../common/backoff.ts';
import { errorMessage } from '../../common/errors.ts';
import type { Logger } from '../../common/logger.ts';
import { LenientToolList } from '../../common/mcp-lists.ts';
import type { Scrubber } from '../../common/secrets.ts';
import { VERSION } from '../../common/version.ts';
import type { ToolRunner } from '../../pup/runner/runner.ts';
import { carrierOf } from '../../telemetry/carrier.ts';
import type { McpMetrics } from './metrics.ts';
import { allowed, callTimeoutMs, checkSchema, classify, exposedName, sessionLost } from './results.ts';
import { StreamTransport } from './transport.ts';

type Json = Record<string, unknown>;

/** A server's tool as the model is offered it. */
export interface McpTool {
  exposed: string;
  server: string;
  name: string;
  description: string;
  schema: Json;
}

export interface McpServerDeps {
  /** Where a stdio server runs (never the pup). */
  runner: ToolRunner;
  workspace: string;
  /** The pup's environment: a remote server's header values are read here. */
  env: NodeJS.ProcessEnv;
  log: Logger;
  scrub: Scrubber;
  metrics?: McpMetrics;
  /** Called when the server's state or tools change (up, down, a new tool list): its status is published. */
  onChange?: () => void;
}

/** What a call gave: the result, or a classed error. */
export type Outcome = { ok: true; result: Json } | { ok: false; error: string; errorClass: ErrorClass };

export interface CallOptions {
  signal?: AbortSignal;
  /** When the turn must end (its time box): the call is cancelled there if its own limit is later. */
  deadlineMs?: number;
  onProgress?: (p: { progress: number; total?: number; message?: string }) => void;
}

/** The values of a remote server's headers, from the pup's environment; a missing variable is a config error. */
export function headerValues(spec: McpServer, env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, h] of Object.entries(spec.headers ?? {})) {
    const v = env[h.env];
    if (!v)
      throw Object.assign(new Error(`header ${name}: the variable ${h.env} is not set`), { code: 'config' });
    out[name] = `${h.prefix}${v}`;
  }
  return out;
}

const RECONNECT = { baseMs: 1_000, maxMs: 60_000, jitter: 'equal' as const };

/**
 * One MCP server: its session (started, lost, started again with backoff), its tools (discovered when
 * the session starts and again on `notifications/tools/list_changed`), and calls with a time limit
 * that cancels them. Nothing here throws to the caller: a server that fails is a reason, not a crash.
 */
export class McpServerConnection {
  readonly spec: McpServer;
  private readonly deps: McpServerDeps;
  private client: Client | undefined;
  private transport: Transport | undefined;
  private connecting: Promise<void> | undefined;
  private retry: NodeJS.Timeout | undefined;
  private attempt = 0;
  /** The connection attempt in progress: a late one (past its timeout) finds it changed and gives up. */
  private gen = 0;
  private stopped = false;
  tools: McpTool[] = [];
  /** Tools the server offers that the model is not given, with why (a bad schema, a name too long). */
  refused: { name: string; reason: string }[] = [];
  resources = false;
  prompts: { name: string; description: string; arguments: string[] }[] = [];
  /** Why the server is unavailable (undefined while it is ready). */
  reason: string | undefined = 'not connected yet';
  /** What the last failure was (its status says why from it, in fixed words); undefined before any. */
  failure: unknown;
  /** How many times its tool list was read again on the server's notice. */
  listChanges = 0;

  constructor(spec: McpServer, deps: McpServerDeps) {
    this.spec = spec;
    this.deps = deps;
  }

  get ready(): boolean {
    return this.client !== undefined && this.reason === undefined;
  }

  private get ms(): number {
    return this.spec.timeoutSeconds * 1000;
  }

  /** Connects once (bounded by the server's timeout); on failure the reason is kept and a retry scheduled. */
  start(): Promise<void> {
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const s = this.spec;
    const gen = ++this.gen;
    let timer: NodeJS.Timeout | undefined;
    try {
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(Object.assign(new Error(`no session within ${this.ms} ms`), { code: -32001 })),
          this.ms,
        );
      });
      await Promise.race([this.open(gen), late]);
      await Promise.race([this.discover(), late]);
      if (this.stopped) {
        await this.drop(); // closed meanwhile: nothing may outlive the hub
        return;
      }
      this.attempt = 0;
      this.reason = undefined;
      this.failure = undefined;
      this.deps.onChange?.();
      this.deps.log.info({
        event_type: 'mcp_server_ready',
        server: s.name,
        tools: this.tools.map((t) => t.name),
      });
      for (const r of this.refused)
        this.deps.log.warn({
          event_type: 'mcp_tool_refused',
          server: s.name,
          tool: r.name,
          reason: r.reason,
        });
    } catch (e) {
      this.gen++;
      await this.drop();
      this.fail(e);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A session over the server's transport: stdio through the runner, else Streamable HTTP, else SSE. */
  private async open(gen: number): Promise<void> {
    const s = this.spec;
    if (s.command) {
      const { runner, workspace } = this.deps;
      if (!runner.mcpStdio) throw new Error('cannot start a stdio server: the tool runner cannot');
      const stream = await runner.mcpStdio({ argv: s.command, cwd: workspace, env: s.env });
      await this.session(new StreamTransport(stream), gen);
      return;
    }
    const url = new URL(s.url as string);
    const headers = headerValues(s, this.deps.env);
    try {
      await this.session(new StreamableHTTPClientTransport(url, { requestInit: { headers } }), gen);
    } catch (e) {
      const c = classify(e);
      if (c === 'auth') throw e;
      this.deps.log.info({
        event_type: 'mcp_sse_fallback',
        server: s.name,
        error: this.deps.scrub.text(errorMessage(e)),
      });
      await this.drop();
      await this.session(new SSEClientTransport(url, { requestInit: { headers } }), gen);
    }
  }

  private async session(transport: Transport, gen: number): Promise<void> {
    const stale = async () => {
      await transport.close().catch(() => undefined);
      throw new Error('superseded: the attempt ran past its timeout');
    };
    if (gen !== this.gen) return stale();
    const client = new Client({ name: 'holt', version: VERSION }, { capabilities: {} });
    client.onerror = (e) =>
      this.deps.log.debug({
        event_type: 'mcp_transport_error',
        server: this.spec.name,
        error: this.deps.scrub.text(e.message),
      });
    this.client = client;
    this.transport = transport;
    // Before the session starts: a server may announce a change as soon as it is initialized.
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      if (this.client !== client) return;
      this.listChanges++;
      try {
        await this.discover();
        this.deps.onChange?.();
        this.deps.log.info({
          event_type: 'mcp_tools_changed',
          server: this.spec.name,
          tools: this.tools.map((t) => t.name),
        });
      } catch (e) {
        this.deps.log.warn({
          event_type: 'mcp_discovery_failed',
          server: this.spec.name,
          error: this.deps.scrub.text(errorMessage(e)),
        });
      }
    });
    await client.connect(transport, { timeout: this.ms });
    if (gen !== this.gen) {
      await client.close().catch(() => undefined);
      return stale();
    }
    // Set after connect: a session that closes later is lost, and started again with backoff.
    client.onclose = () => {
      if (this.client !== client || this.stopped) return;
      this.client = undefined;
      this.fail(new Error('the session closed (the server ended or the connection was lost)'));
    };
  }

  /** The tool list (all pages), the allowlist applied; resources and prompts when the server has them. */
  private async discover(): Promise<void> {
    const client = this.client;
    if (!client) throw new Error('no session');
    const s = this.spec;
    const tools: McpTool[] = [];
    const refused: { name: string; reason: string }[] = [];
    let cursor: string | undefined;
    do {
      // Read leniently: one tool with an unusable schema is refused alone, not the whole list.
      const page = await client.request(
        { method: 'tools/list', params: cursor ? { cursor } : {} },
        LenientToolList,
        { timeout: this.ms },
      );
      for (const t of page.tools) {
        if (!allowed(t.name, s.tools)) continue;
        const exposed = exposedName(s.name, t.name);
        const schema = checkSchema(t.inputSchema);
        if (!exposed)
          refused.push({
            name: t.name,
            reason:
              "its name is not a valid function name (letters, digits, _ and -; 64 at most with the server's)",
          });
        else if (!schema.ok) refused.push({ name: t.name, reason: schema.error });
        else
          tools.push({
            exposed,
            server: s.name,
            name: t.name,
            description: (t.description ?? '').slice(0, 2000),
            schema: schema.schema,
          });
      }
      cursor = page.nextCursor;
    } while (cursor && tools.length < 500);
    const caps = client.getServerCapabilities() ?? {};
    this.resources = caps.resources !== undefined;
    // Prompts are an extra: a server whose list fails still gives its tools.
    this.prompts = caps.prompts
      ? await client.listPrompts({}, { timeout: this.ms }).then(
          (r) =>
            r.prompts.map((p) => ({
              name: p.name,
              description: (p.description ?? '').slice(0, 500),
              arguments: (p.arguments ?? []).map((a) => a.name),
            })),
          (e: unknown) => {
            this.deps.log.warn({
              event_type: 'mcp_prompts_unreadable',
              server: s.name,
              error: this.deps.scrub.text(errorMessage(e)),
            });
            return [];
          },
        )
      : [];
    this.tools = tools;
    this.refused = refused;
  }

  private fail(e: unknown): void {
    this.reason = `${classify(e)}: ${this.deps.scrub.text(errorMessage(e))}`;
    this.failure = e;
    this.tools = [];
    if (!this.stopped) this.deps.onChange?.();
    this.deps.log.warn({ event_type: 'mcp_server_unavailable', server: this.spec.name, reason: this.reason });
    if (this.stopped) return;
    clearTimeout(this.retry);
    const wait = backoffMs(this.attempt++, RECONNECT);
    this.retry = setTimeout(() => void this.start(), wait);
    this.retry.unref();
  }

  private async drop(): Promise<void> {
    const c = this.client;
    const t = this.transport;
    this.client = undefined;
    this.transport = undefined;
    await (c ? c.close() : t?.close())?.catch(() => undefined);
  }

  /** One request to the server, with the session started again once when an HTTP server forgot it. */
  private async request<T>(
    what: string,
    send: (c: Client) => Promise<T>,
  ): Promise<{ ok: true; value: T } | Extract<Outcome, { ok: false }>> {
    const started = performance.now();
    const r = await this.exchange(what, send);
    const m = this.deps.metrics;
    if (m) {
      const isError = r.ok && (r.value as { isError?: unknown } | undefined)?.isError === true;
      m.calls.inc({ server: this.spec.name, outcome: !r.ok ? r.errorClass : isError ? 'is_error' : 'ok' });
      m.duration.observe({ server: this.spec.name }, (performance.now() - started) / 1000);
    }
    return r;
  }

  private async exchange<T>(
    what: string,
    send: (c: Client) => Promise<T>,
  ): Promise<{ ok: true; value: T } | Extract<Outcome, { ok: false }>> {
    for (let again = 0; ; again++) {
      const client = this.client;
      if (!client || this.reason !== undefined)
        return {
          ok: false,
          error: `the MCP server ${this.spec.name} is unavailable (${this.reason ?? 'no session'})`,
          errorClass: 'transient',
        };
      try {
        return { ok: true, value: await send(client) };
      } catch (e) {
        if (again === 0 && this.spec.url && sessionLost(e)) {
          this.deps.log.info({ event_type: 'mcp_session_lost', server: this.spec.name });
          await this.drop();
          await this.start();
          continue;
        }
        const errorClass = classify(e);
        return {
          ok: false,
          error: `${what} failed (${errorClass}): ${this.deps.scrub.text(errorMessage(e))}`,
          errorClass,
        };
      }
    }
  }

  /** Calls a tool (its own name); past the timeout the call is cancelled (notifications/cancelled). */
  async call(name: string, args: Json, o: CallOptions = {}): Promise<Outcome> {
    // The caller's trace (the execute_tool span) where MCP servers that trace look for it.
    const trace = carrierOf();
    const r = await this.request(`${this.spec.name}/${name}`, (c) =>
      c.callTool({ name, arguments: args, ...(trace ? { _meta: trace } : {}) }, CallToolResultSchema, {
        timeout: callTimeoutMs(this.ms, o.deadlineMs, Date.now()),
        ...(o.signal ? { signal: o.signal } : {}),
        ...(o.onProgress ? { onprogress: o.onProgress } : {}),
      }),
    );
    return r.ok ? { ok: true, result: r.value as Json } : r;
  }

  async readResource(uri: string, signal?: AbortSignal): Promise<Outcome> {
    const r = await this.request(`reading ${uri}`, (c) =>
      c.readResource({ uri }, { timeout: this.ms, ...(signal ? { signal } : {}) }),
    );
    return r.ok ? { ok: true, result: r.value as Json } : r;
  }

  async getPrompt(name: string, args: Record<string, string>, signal?: AbortSignal): Promise<Outcome> {
    const r = await this.request(`prompt ${name}`, (c) =>
      c.getPrompt({ name, arguments: args }, { timeout: this.ms, ...(signal ? { signal } : {}) }),
    );
    return r.ok ? { ok: true, result: r.value as Json } : r;
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.drop();
  }
}
