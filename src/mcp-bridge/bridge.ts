import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../common/logger.ts';
import { type ChildEnd, describeEnd, StdioChild } from './child.ts';

export interface BridgeOptions {
  command: string;
  args: string[];
  /** The server process's environment (the bridge's own: on Kubernetes the ToolServer's `env`). */
  env: NodeJS.ProcessEnv;
  port: number;
  host: string;
  /** Host names a client may use (the port is added); other Host headers are refused (DNS rebinding). */
  hostnames: string[];
  path: string;
  maxSessions: number;
  /** A session with no request for this long is closed and its process stopped. */
  idleMs: number;
  log: Logger;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  child: StdioChild;
  pending: Set<RequestId>;
  lastSeen: number;
  /** The client's GET stream is open: where the server's own notices and requests go. */
  standalone: boolean;
  /** Notices sent before that stream opened (list_changed right after initialize), delivered on it. */
  queue: JSONRPCMessage[];
  end?: ChildEnd;
}

const MAX_QUEUED = 256;

export interface Bridge {
  server: Server;
  port: number;
  sessions(): number;
  close(): Promise<void>;
}

const MAX_BODY = 4 * 1024 * 1024;

/**
 * `holt mcp-bridge`: a stdio MCP server served over Streamable HTTP. Each client session gets its own
 * process: a stdio server is written for one client (its initialize, subscriptions, roots and log level
 * are per connection), so sharing one would leak one client's state to another and need a fake
 * handshake. A process that dies ends its session with an error for every pending call; the next
 * session starts a fresh one (the pup's client opens a new session when ours is forgotten).
 */
export async function startBridge(o: BridgeOptions): Promise<Bridge> {
  const sessions = new Map<string, Session>();
  let lastFailure: string | undefined;
  let allowed: string[] = []; // known once listening (the port may be 0 in tests)

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const rpcError = (res: ServerResponse, status: number, message: string) =>
    json(res, status, { jsonrpc: '2.0', error: { code: -32000, message }, id: null });

  const openSession = (): Session => {
    const child = new StdioChild(o.command, o.args, o.env);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableDnsRebindingProtection: true,
      allowedHosts: allowed,
      onsessioninitialized: (id) => {
        sessions.set(id, s);
      },
    });
    const s: Session = {
      transport,
      child,
      pending: new Set(),
      lastSeen: Date.now(),
      standalone: false,
      queue: [],
    };
    transport.onmessage = (m: JSONRPCMessage) => {
      s.lastSeen = Date.now();
      if ('method' in m && 'id' in m) s.pending.add(m.id);
      if (!child.send(m)) void finish(s);
    };
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
      child.stop();
    };
    child.onmessage = (m) => {
      if (('result' in m || 'error' in m) && 'id' in m) {
        if (m.id !== undefined) s.pending.delete(m.id);
        if ('result' in m) lastFailure = undefined;
      }
      const response = 'result' in m || 'error' in m;
      if (!response && !s.standalone) {
        if (s.queue.push(m) > MAX_QUEUED) s.queue.shift();
        return;
      }
      transport.send(m).catch(() => {}); // a client gone: its stream is closed, nothing to tell
    };
    child.onend = (end) => void ended(s, end);
    return s;
  };

  // Every call still waiting is answered with why, then the session ends: the client's next request
  // gets 404 and it opens a new session, with a new process.
  const finish = async (s: Session) => {
    const message = describeEnd(s.end ?? { code: null, signal: null });
    for (const id of [...s.pending]) {
      s.pending.delete(id);
      await s.transport.send({ jsonrpc: '2.0', id, error: { code: -32603, message } }).catch(() => {});
    }
    if (s.transport.sessionId === undefined) return; // initialize not read yet: onmessage finishes
    sessions.delete(s.transport.sessionId);
    await s.transport.close().catch(() => {});
  };

  const ended = async (s: Session, end: ChildEnd) => {
    s.end = end;
    if (end.error || s.transport.sessionId === undefined) lastFailure = describeEnd(end);
    o.log.warn({ event_type: 'mcp_bridge_child_ended', session: s.transport.sessionId, ...end });
    await finish(s);
  };

  // The SDK registers the GET stream before it writes the response head: once a 200 head is out, the
  // queued notices can go on it.
  const watchStandalone = (s: Session, res: ServerResponse) => {
    const writeHead = res.writeHead.bind(res) as (...a: unknown[]) => ServerResponse;
    (res as { writeHead: unknown }).writeHead = (...a: unknown[]) => {
      const r = writeHead(...a);
      if (a[0] === 200) {
        s.standalone = true;
        res.once('close', () => {
          s.standalone = false;
        });
        for (const m of s.queue.splice(0)) s.transport.send(m).catch(() => {});
      }
      return r;
    };
  };

  const readBody = (req: IncomingMessage) =>
    new Promise<string>((resolve, reject) => {
      let size = 0;
      const parts: Buffer[] = [];
      req.on('data', (b: Buffer) => {
        size += b.length;
        if (size > MAX_BODY) {
          reject(new Error(`request body over ${MAX_BODY} bytes`));
          req.destroy();
        } else parts.push(b);
      });
      req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
      req.on('error', reject);
    });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://bridge');
    // Probes come from the kubelet with the pod's IP as Host, and learn nothing but health.
    if (url.pathname === '/healthz') {
      if (lastFailure) return json(res, 503, { ok: false, reason: lastFailure });
      return json(res, 200, { ok: true, sessions: sessions.size });
    }
    if (!allowed.includes(req.headers.host ?? '')) {
      return rpcError(res, 403, `Host ${JSON.stringify(req.headers.host ?? '')} is not served here`);
    }
    if (url.pathname !== o.path) return rpcError(res, 404, `no MCP endpoint at ${url.pathname}`);
    const sid = req.headers['mcp-session-id'];
    if (typeof sid === 'string') {
      const s = sessions.get(sid);
      if (!s) return rpcError(res, 404, 'Session not found');
      s.lastSeen = Date.now();
      if (req.method === 'GET') watchStandalone(s, res);
      if (req.method !== 'POST') return s.transport.handleRequest(req, res);
      const body = parseOr400(await readBody(req), res);
      if (body !== undefined) await s.transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== 'POST') return rpcError(res, 400, 'Bad Request: no session (initialize first)');
    const body = parseOr400(await readBody(req), res);
    if (body === undefined) return;
    if (!isInitializeRequest(body)) return rpcError(res, 400, 'Bad Request: no session (initialize first)');
    if (sessions.size >= o.maxSessions) {
      return rpcError(res, 503, `the bridge serves at most ${o.maxSessions} sessions`);
    }
    const s = openSession();
    await s.transport.handleRequest(req, res, body);
  };

  const parseOr400 = (text: string, res: ServerResponse): unknown => {
    try {
      return JSON.parse(text);
    } catch {
      rpcError(res, 400, 'Parse error: the body is not JSON');
      return undefined;
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: Error) => {
      o.log.warn({ event_type: 'mcp_bridge_request_failed', err: e.message });
      if (!res.headersSent) rpcError(res, 400, e.message);
      else res.end();
    });
  });
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const s of sessions.values()) if (now - s.lastSeen > o.idleMs) void s.transport.close();
    },
    Math.min(o.idleMs, 30_000),
  );
  sweep.unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  allowed = o.hostnames.flatMap((h) => (port === 80 ? [h, `${h}:${port}`] : [`${h}:${port}`]));
  o.log.info({ event_type: 'mcp_bridge_listening', port, path: o.path, command: o.command });
  return {
    server,
    port,
    sessions: () => sessions.size,
    close: async () => {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((s) => s.transport.close().catch(() => {})));
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
