import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LenientToolList } from '../../common/mcp-lists.ts';

export interface DiscoveredTool {
  name: string;
  description?: string;
}
export type Discovery = { ok: true; tools: DiscoveredTool[] } | { ok: false; reason: string };

/** The tools a ToolServer lists, read by connecting to it with the SDK client (one short session). */
export async function discoverTools(url: string, timeoutMs = 5_000): Promise<Discovery> {
  const client = new Client({ name: 'holt-operator', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const timer = new AbortController();
  const t = setTimeout(() => timer.abort(), timeoutMs);
  try {
    await client.connect(transport, { signal: timer.signal, timeout: timeoutMs });
    const tools: DiscoveredTool[] = [];
    let cursor: string | undefined;
    do {
      // Leniently: a server with one unusable tool schema still lists its others (the pup refuses that one).
      const page = await client.request(
        { method: 'tools/list', params: cursor ? { cursor } : {} },
        LenientToolList,
        { signal: timer.signal, timeout: timeoutMs },
      );
      for (const x of page.tools)
        tools.push({ name: x.name, ...(x.description ? { description: x.description.slice(0, 200) } : {}) });
      cursor = page.nextCursor;
    } while (cursor && tools.length < 1000);
    return { ok: true, tools };
  } catch (e) {
    return { ok: false, reason: `cannot list tools at ${url}: ${discoveryReason(e)}` };
  } finally {
    clearTimeout(t);
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}

/**
 * Why a discovery failed, without what the far end said: a ToolServer's url is a namespace user's
 * choice, and the operator may reach what that user cannot, so no response text goes to the status.
 */
export function discoveryReason(e: unknown): string {
  const err = (e ?? {}) as { message?: unknown; code?: unknown; cause?: { code?: unknown } };
  const msg = String(err.message ?? e);
  // The SDK's StreamableHTTPError carries the status as `code` and the response body in its message.
  if (typeof err.code === 'number' && err.code >= 100 && err.code <= 599) return `HTTP ${err.code}`;
  const code =
    typeof err.cause?.code === 'string'
      ? err.cause.code
      : typeof err.code === 'string'
        ? err.code
        : undefined;
  if (code && /^[A-Z_]{3,32}$/.test(code)) return code;
  if (/timed? ?out|abort/i.test(msg)) return 'timed out';
  return 'not an MCP server (its answer is not shown)';
}
