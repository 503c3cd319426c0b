// The MCP client under test for the conformance suite's client scenarios (test/mcp-client-conformance.test.ts):
// Holt's own client (src/llm/mcp: McpHub and McpServerConnection, as a pup runs them: Streamable HTTP
// with SSE fallback, session handling, discovery, calls) connected to the URL the suite appends as the
// last argument. It lists the tools and calls each, as an agent's model would, then exits: 0 when every
// call answered, 1 when the server was unavailable or a call failed (the suite judges from its side).
// Usage (by the suite): node test/harness/mcp-conformance-client.ts <server-url>
import { tmpdir } from 'node:os';
import { McpServer } from '../../src/api/agent.ts';
import { silentLogger } from '../../src/common/logger.ts';
import { Scrubber } from '../../src/common/secrets.ts';
import { McpHub } from '../../src/llm/mcp/hub.ts';
import { LocalToolRunner } from '../../src/pup/runner/runner.ts';

const url = process.argv.at(-1);
if (!url?.startsWith('http')) {
  process.stderr.write('usage: mcp-conformance-client.ts <server-url>\n');
  process.exit(2);
}

/** Arguments for the suite's tools that take some (the model would fill them from their schemas). */
const ARGS: Record<string, Record<string, unknown>> = { add_numbers: { a: 5, b: 3 } };

const hub = new McpHub([McpServer.parse({ name: 'conformance', url, timeoutSeconds: 10 })], {
  runner: new LocalToolRunner({ PATH: process.env.PATH }), // unused: a url server needs no runner
  workspace: tmpdir(),
  env: {},
  log: silentLogger(),
  scrub: new Scrubber([]),
});
let code = 0;
try {
  await hub.start();
  const server = hub.servers[0]!;
  if (!server.ready) {
    process.stderr.write(`unavailable: ${server.reason}\n`);
    code = 1;
  }
  process.stdout.write(`tools: ${server.tools.map((t) => t.name).join(', ')}\n`);
  for (const t of server.tools) {
    const r = await server.call(t.name, ARGS[t.name] ?? {});
    process.stdout.write(`${t.name}: ${JSON.stringify(r)}\n`);
    if (!r.ok) code = 1;
  }
} finally {
  await hub.close();
}
process.exit(code);
