import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * A test-only bridge from Streamable HTTP on 127.0.0.1 to a stdio MCP server: each HTTP session gets
 * its own server process (`holt mcp`), and the messages pass through unchanged. It lets a client that
 * speaks only HTTP (the MCP conformance suite) test the stdio server as IDEs run it. The HTTP side is
 * the SDK's own transport, with its DNS rebinding protection on.
 *
 * Streamable HTTP answers on the stream of the request a message relates to: a progress notification
 * goes with the request that gave its token; any other notification with the one request in flight, if
 * there is exactly one (else on the session's own stream).
 */
export interface McpStdioBridge {
  url: string;
  /** Server processes started (one per session). */
  sessions(): number;
  close(): Promise<void>;
}

/** Sessions kept open at once; beyond, the oldest is closed (with its process). */
const MAX_LIVE = 3;

export async function startMcpStdioBridge(server: StdioServerParameters): Promise<McpStdioBridge> {
  type Pair = { http: StreamableHTTPServerTransport; stdio: StdioClientTransport; closed: boolean };
  const sessions = new Map<string, Pair>();
  const all: Pair[] = [];
  const closePair = async (p: Pair) => {
    p.closed = true;
    await p.http.close().catch(() => undefined);
    await p.stdio.close().catch(() => undefined);
  };
  // The next session's process, started ahead: a session should not wait for a process to start.
  const spawn = async () => {
    const stdio = new StdioClientTransport({ ...server, stderr: 'ignore' });
    await stdio.start();
    return stdio;
  };
  let next = spawn();
  let port = 0;

  const open = async () => {
    const stdio = await next;
    next = spawn();
    // A client that goes without ending its session (the suite's) leaves its process: the oldest go.
    for (const old of all.filter((p) => !p.closed).slice(0, -MAX_LIVE + 1)) await closePair(old);
    const inFlight = new Set<RequestId>();
    const byToken = new Map<string | number, RequestId>();
    const http: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, pair),
      enableDnsRebindingProtection: true,
      allowedHosts: [`127.0.0.1:${port}`, `localhost:${port}`],
    });
    const pair = { http, stdio, closed: false };
    all.push(pair);
    http.onmessage = (m: JSONRPCMessage) => {
      if ('method' in m && 'id' in m) {
        inFlight.add(m.id);
        const token = (m.params as { _meta?: { progressToken?: string | number } } | undefined)?._meta
          ?.progressToken;
        if (token !== undefined) byToken.set(token, m.id);
      }
      void stdio.send(m);
    };
    stdio.onmessage = (m: JSONRPCMessage) => {
      let related: RequestId | undefined;
      if ('id' in m && !('method' in m)) {
        if (m.id !== undefined) inFlight.delete(m.id);
      } else if ('method' in m && !('id' in m)) {
        const token = (m.params as { progressToken?: string | number } | undefined)?.progressToken;
        related =
          token !== undefined ? byToken.get(token) : inFlight.size === 1 ? [...inFlight][0] : undefined;
      }
      void http
        .send(m, related === undefined ? undefined : { relatedRequestId: related })
        .catch(() => undefined);
    };
    http.onclose = () => void stdio.close();
    await http.start();
    return http;
  };

  const httpServer: Server = createServer((req, res) => {
    const id = req.headers['mcp-session-id'];
    const known = typeof id === 'string' ? sessions.get(id) : undefined;
    const handle = async () => {
      if (known) return known.http.handleRequest(req, res);
      if (typeof id === 'string' || req.method !== 'POST') {
        res.writeHead(typeof id === 'string' ? 404 : 400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'no such session' }, id: null }),
        );
        return;
      }
      return (await open()).handleRequest(req, res);
    };
    handle().catch((e: Error) => {
      if (!res.headersSent) res.writeHead(500).end(e.message);
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  port = (httpServer.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sessions: () => all.length,
    async close() {
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
      await Promise.all(all.filter((p) => !p.closed).map(closePair));
      await (await next).close().catch(() => undefined);
    },
  };
}
