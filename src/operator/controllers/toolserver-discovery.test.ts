import { afterAll, describe, expect, it } from 'vitest';
import { TINY } from '../../llm/mcp/mcp.testkit.ts';
import { testBridge } from '../../mcp-bridge/bridge.testkit.ts';
import type { Bridge } from '../../mcp-bridge/bridge.ts';
import { discoverTools } from './toolserver-discovery.ts';

// The operator's discovery of a ToolServer's tools, against `holt mcp-bridge` running the tests' tiny
// stdio server: the form a ToolServer with image + command takes on a cluster.

describe('ToolServer discovery', () => {
  let bridge: Bridge | undefined;
  afterAll(async () => {
    await bridge?.close();
  });

  it('lists every tool of a server whose one tool has an unusable schema (the SDK would refuse the whole list)', async () => {
    bridge = await testBridge([TINY]);
    const d = await discoverTools(`http://127.0.0.1:${bridge.port}/mcp`, 15_000);
    // The tiny server's `bad` tool declares a string as its input schema.
    expect(d).toMatchObject({ ok: true });
    const names = d.ok ? d.tools.map((t) => t.name) : [];
    expect(names).toEqual(expect.arrayContaining(['touch', 'env', 'bad']));
  });
});
