import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

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
      const page = await client.listTools(cursor ? { cursor } : {}, {
        signal: timer.signal,
        timeout: timeoutMs,
      });
      for (const x of page.tools)
        tools.push({ name: x.name, ...(x.description ? { description: x.description.slice(0, 200) } : {}) });
      cursor = page.nextCursor;
    } while (cursor && tools.length < 1000);
    return { ok: true, tools };
  } catch (e) {
    return { ok: false, reason: `cannot list tools at ${url}: ${(e as Error).message}`.slice(0, 500) };
  } finally {
    clearTimeout(t);
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}
