import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** An agent's MCP servers as an alert reads them: which are up, and how their calls end. */
export class McpMetrics {
  readonly calls: Counter<'server' | 'outcome'>;
  readonly duration: Histogram<'server'>;
  constructor(registry: Registry, servers: () => { name: string; ready: boolean }[]) {
    const registers = [registry];
    new Gauge({
      name: 'holt_mcp_server_up',
      help: "1 while an MCP server of the agent has a session and its tools are offered (the log's mcp_server_unavailable says why not)",
      labelNames: ['server'],
      registers,
      collect() {
        for (const s of servers()) this.set({ server: s.name }, s.ready ? 1 : 0);
      },
    });
    this.calls = new Counter({
      name: 'holt_mcp_calls_total',
      help: 'Calls to MCP servers (tools, resources, prompts), by outcome: ok, is_error (the tool said so), or the error class',
      labelNames: ['server', 'outcome'],
      registers,
    });
    this.duration = new Histogram({
      name: 'holt_mcp_call_duration_seconds',
      help: 'Time per call to an MCP server',
      labelNames: ['server'],
      buckets: [0.005, 0.025, 0.1, 0.5, 2, 10, 30, 120],
      registers,
    });
  }
}
