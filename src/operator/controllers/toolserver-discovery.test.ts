import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../common/logger.ts';
import { TINY } from '../../llm/mcp/mcp.testkit.ts';
import { type Bridge, startBridge } from '../../mcp-bridge/bridge.ts';
import { discoverTools } from './toolserver-discovery.ts';

// The operator's discovery of a ToolServer's tools, against `holt mcp-bridge` running the tests' tiny
// stdio server: the form a ToolServer with image + command takes on a cluster.

describe('ToolServer discovery', () => {
  let bridge: Bridge | undefined;
  afterAll(async () => {
    await bridge?.close();
  });

  it('lists every tool of a server whose one tool has an unusable schema (the SDK would refuse the whole list)', async () => {
    bridge = await startBridge({
      command: process.execPath,
      args: [TINY],
      env: { PATH: process.env.PATH ?? '' },
      port: 0,
      host: '127.0.0.1',
      hostnames: ['127.0.0.1'],
      path: '/mcp',
      maxSessions: 4,
      idleMs: 600_000,
      log: silentLogger(),
    });
    const d = await discoverTools(`http://127.0.0.1:${bridge.port}/mcp`, 15_000);
    // The tiny server's `bad` tool declares a string as its input schema.
    expect(d).toMatchObject({ ok: true });
    const names = d.ok ? d.tools.map((t) => t.name) : [];
    expect(names).toEqual(expect.arrayContaining(['touch', 'env', 'bad']));
  });
});
