// The overhead of one MCP tool call as an agent makes it (src/llm/mcp): server-everything's `echo`
// called `--calls` times in a row over stdio through the local runner (a child of this process), over
// stdio through the runner socket (`holt tool-runner`'s server, in this process), and over Streamable
// HTTP (server-everything listening on 127.0.0.1). Prints JSON: per transport, the median and p99 of a
// call in milliseconds. Traffic goes to 127.0.0.1 only.
// Usage: node bench/mcp/main.ts [--calls 500]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { McpServer } from '../../src/api/agent.ts';
import { silentLogger } from '../../src/common/logger.ts';
import { Scrubber } from '../../src/common/secrets.ts';
import { McpHub } from '../../src/llm/mcp/hub.ts';
import { EVERYTHING, httpEverything, stopChild } from '../../src/llm/mcp/mcp.testkit.ts';
import { freePort } from '../../src/local/ports.ts';
import { LocalToolRunner, type ToolRunner } from '../../src/pup/runner/runner.ts';
import { SocketToolRunner, startRunnerServer } from '../../src/pup/runner/socket.ts';
import { pct } from '../lib/proc.ts';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '500' } } });
const CALLS = Number(values.calls);
const dir = mkdtempSync(join(tmpdir(), 'bench-mcp-'));

async function measure(server: Record<string, unknown>, runner: ToolRunner) {
  const hub = new McpHub([McpServer.parse(server)], {
    runner,
    workspace: dir,
    env: {},
    log: silentLogger(),
    scrub: new Scrubber([]),
  });
  await hub.start();
  const s = hub.servers[0]!;
  if (!s.ready) throw new Error(`server not ready: ${s.reason}`);
  for (let i = 0; i < 20; i++) await s.call('echo', { message: 'warm' });
  const ms: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    const r = await s.call('echo', { message: `call ${i}` });
    ms.push(performance.now() - t);
    if (!r.ok) throw new Error(r.error);
  }
  await hub.close();
  return { calls: CALLS, p50_ms: pct(ms, 50), p99_ms: pct(ms, 99) };
}

const local = new LocalToolRunner({ PATH: process.env.PATH, HOME: process.env.HOME });
const sock = join(dir, 'runner.sock');
const runnerServer = await startRunnerServer({
  socket: sock,
  env: { PATH: process.env.PATH },
  log: silentLogger(),
});
const port = await freePort();
const http = await httpEverything('streamableHttp', port);
try {
  const out = {
    stdio_local_runner: await measure({ name: 'everything', command: [EVERYTHING] }, local),
    stdio_runner_socket: await measure(
      { name: 'everything', command: [EVERYTHING] },
      new SocketToolRunner(sock),
    ),
    streamable_http: await measure({ name: 'everything', url: `http://127.0.0.1:${port}/mcp` }, local),
  };
  process.stdout.write(`${JSON.stringify({ bench: 'mcp', ...out }, null, 2)}\n`);
} finally {
  await stopChild(http);
  await new Promise<void>((r) => runnerServer.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
}
