import type { Registry } from 'prom-client';
import { z } from 'zod';
import type { McpServer } from '../../api/agent.ts';
import type { ToolSpec } from '../model/model.ts';
import { McpMetrics } from './metrics.ts';
import { McpServerConnection, type McpServerDeps, type McpTool } from './server.ts';

export const MCP_READ_RESOURCE = 'mcp_read_resource';
export const MCP_GET_PROMPT = 'mcp_get_prompt';

export const ReadResourceArgs = z.object({
  server: z.string().min(1).max(32),
  uri: z.string().min(1).max(4096),
});
export const GetPromptArgs = z.object({
  server: z.string().min(1).max(32),
  name: z.string().min(1).max(256),
  arguments: z.record(z.string(), z.string()).default({}),
});

/**
 * An agent's MCP servers (docs/agents.md § Tools from MCP servers): each connected on its own, so a
 * hung or dead one delays nothing but itself (its tools are absent, its reason logged); the tools of
 * those that are up, named `<server>__<tool>`; the two built-ins for resources and prompts.
 */
export class McpHub {
  readonly servers: McpServerConnection[];
  /**
   * Called when a server's state or tools changed (status.ts publishes them): once when the first
   * connections are done, then on each change; never for a call.
   */
  onChange?: () => void;
  #started = false;
  /** `registry`: the pup's metrics (holt_mcp_*). */
  constructor(specs: McpServer[], deps: McpServerDeps, registry?: Registry) {
    const metrics =
      registry &&
      new McpMetrics(registry, () => this.servers.map((s) => ({ name: s.spec.name, ready: s.ready })));
    const onChange = () => {
      if (this.#started) this.onChange?.();
    };
    this.servers = specs.map(
      (s) => new McpServerConnection(s, { ...deps, ...(metrics ? { metrics } : {}), onChange }),
    );
  }

  /** Every server's first connection, each bounded by its own timeout; never rejects. */
  async start(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.start()));
    this.#started = true;
    this.onChange?.();
  }

  server(name: string): McpServerConnection | undefined {
    return this.servers.find((s) => s.spec.name === name);
  }

  /** The tools offered now: those of the servers that are up. */
  tools(): McpTool[] {
    return this.servers.flatMap((s) => (s.ready ? s.tools : []));
  }

  tool(exposed: string): McpTool | undefined {
    return this.tools().find((t) => t.exposed === exposed);
  }

  /** Whether a call by this name is the hub's (a server's tool or one of its built-ins). */
  owns(name: string): boolean {
    return name === MCP_READ_RESOURCE || name === MCP_GET_PROMPT || this.tool(name) !== undefined;
  }

  /** Why each server that is down is down. */
  problems(): { server: string; reason: string }[] {
    return this.servers
      .filter((s) => !s.ready)
      .map((s) => ({ server: s.spec.name, reason: s.reason ?? 'down' }));
  }

  /** The specs the model is given: the servers' tools, then the built-ins where a server offers what they read. */
  specs(): ToolSpec[] {
    const up = this.servers.filter((s) => s.ready);
    const out: ToolSpec[] = this.tools().map((t) => ({
      type: 'function',
      function: {
        name: t.exposed,
        description: `[MCP server ${t.server}] ${t.description}`,
        parameters: t.schema,
      },
    }));
    const withResources = up.filter((s) => s.resources).map((s) => s.spec.name);
    if (withResources.length)
      out.push({
        type: 'function',
        function: {
          name: MCP_READ_RESOURCE,
          description: `Read a resource of an MCP server by its URI (servers: ${withResources.join(', ')}).`,
          parameters: z.toJSONSchema(ReadResourceArgs, { io: 'input' }) as Record<string, unknown>,
        },
      });
    const prompts = up.flatMap((s) =>
      s.prompts.map(
        (p) =>
          `${s.spec.name}/${p.name}(${p.arguments.join(', ')})${p.description ? `: ${p.description}` : ''}`,
      ),
    );
    if (prompts.length)
      out.push({
        type: 'function',
        function: {
          name: MCP_GET_PROMPT,
          description:
            `Get a prompt template of an MCP server, filled with arguments. Available: ${prompts.slice(0, 30).join('; ')}`.slice(
              0,
              4000,
            ),
          parameters: z.toJSONSchema(GetPromptArgs, { io: 'input' }) as Record<string, unknown>,
        },
      });
    return out;
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.close()));
  }
}
