import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/wait.ts';
import { EVERYTHING_JS, TINY } from '../llm/mcp/mcp.testkit.ts';
import { testBridge } from './bridge.testkit.ts';
import type { Bridge } from './bridge.ts';

const bridgeOf = (args: string[], command = process.execPath) => testBridge(args, command, 4);

async function connect(b: Bridge, onListChanged?: () => void): Promise<Client> {
  const c = new Client({ name: 'bridge-test', version: '1' });
  if (onListChanged) c.setNotificationHandler(ToolListChangedNotificationSchema, async () => onListChanged());
  await c.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${b.port}/mcp`)));
  return c;
}

/** Ends the session (DELETE) as a well-behaved client does, then the client. */
async function end(c: Client): Promise<void> {
  await (c.transport as StreamableHTTPClientTransport).terminateSession();
  await c.close();
}

/** A raw request, to choose the Host header (fetch may not). */
const raw = (port: number, path: string, host: string, body?: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body ? 'POST' : 'GET',
        headers: { host, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      },
      (res) => {
        let text = '';
        res.on('data', (b: Buffer) => {
          text += b.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });

const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
});

describe('holt mcp-bridge: server-everything over Streamable HTTP', () => {
  let b: Bridge;
  beforeAll(async () => {
    b = await bridgeOf([EVERYTHING_JS]);
  });
  afterAll(() => b?.close());

  it('lists its tools, calls one, and forwards tools/list_changed', async () => {
    let changes = 0;
    const c = await connect(b, () => changes++);
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'get-sum']));
    const r = await c.callTool({ name: 'echo', arguments: { message: 'hi' } });
    expect(r.content).toEqual([{ type: 'text', text: 'Echo: hi' }]);
    // server-everything adds tools once initialized and says so; the notice reaches this client.
    await eventually('list_changed forwarded', () => changes > 0);
    expect((await c.listTools()).tools.map((t) => t.name)).toContain('simulate-research-query');
    await end(c);
    await eventually('its session ended', () => b.sessions() === 0);
  });

  it('gives each client its own session and process, ended when the client ends it', async () => {
    const [c1, c2] = [await connect(b), await connect(b)];
    expect(b.sessions()).toBe(2);
    await end(c1);
    await eventually('the ended session gone', () => b.sessions() === 1);
    expect((await c2.listTools()).tools.length).toBeGreaterThan(0);
    await end(c2);
    await eventually('both gone', () => b.sessions() === 0);
  });

  it('refuses a request whose Host is not one it serves (DNS rebinding), and answers /healthz', async () => {
    const bad = await raw(b.port, '/mcp', 'attacker.example', INIT);
    expect(bad.status).toBe(403);
    expect(bad.text).toContain('attacker.example');
    expect(b.sessions()).toBe(0); // nothing was started for it
    const good = await raw(b.port, '/mcp', `127.0.0.1:${b.port}`, INIT);
    expect(good.status).toBe(200);
    const health = await raw(b.port, '/healthz', 'any-pod-ip');
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toMatchObject({ ok: true });
  });
});

describe('holt mcp-bridge: a server that dies', () => {
  it('answers the pending call with why, and the next session gets a new process', async () => {
    const b = await bridgeOf([TINY]);
    try {
      const c = await connect(b);
      await expect(c.callTool({ name: 'boom', arguments: {} })).rejects.toThrow(
        /MCP server process exited \(code 3\)/,
      );
      await eventually('the dead session gone', () => b.sessions() === 0);
      await expect(c.listTools()).rejects.toThrow(/Session not found|404/);
      const again = await connect(b);
      const r = await again.callTool({ name: 'touch', arguments: { path: '/x' } });
      expect(JSON.stringify(r.content)).toContain('/x');
      await again.close();
    } finally {
      await b.close();
    }
  });

  it('reports a command that cannot start: the client reads why, /healthz is 503', async () => {
    const b = await bridgeOf([], '/nonexistent/mcp-server');
    try {
      await expect(connect(b)).rejects.toThrow(/MCP server process failed: .*ENOENT/);
      const h = await raw(b.port, '/healthz', 'x');
      expect(h.status).toBe(503);
      expect(JSON.parse(h.text).reason).toMatch(/ENOENT/);
    } finally {
      await b.close();
    }
  });
});
