import { z } from 'zod';
import { argv, envList, resources } from './common.ts';

/** A destination a ToolServer's pods may reach (its NetworkPolicy's egress), besides cluster DNS. */
export const ToolServerEgress = z
  .object({
    cidr: z.string().min(1).describe('Destination range, e.g. 203.0.113.0/24.'),
    ports: z.array(z.number().int().min(1).max(65535)).min(1).describe('TCP ports on it.'),
  })
  .describe('Egress the server needs for its own work.');

/**
 * `ToolServer` (holt.io/v1alpha1, namespaced): one MCP server that Agents of the namespace reference by
 * name (`spec.llm.toolServers`). Three forms: `image` + `command` (a stdio server, run behind
 * `holt mcp-bridge` from the runtime bundle), `image` alone (it serves Streamable HTTP on `port` at
 * `path`), or `url` (outside the cluster; nothing runs).
 */
export const ToolServerSpec = z
  .object({
    image: z.string().min(1).optional().describe('Image of the server (with command: a stdio server).'),
    command: argv.optional().describe('A stdio server: its argv, run by holt mcp-bridge in the image.'),
    port: z.number().int().min(1).max(65535).default(8080).describe('Port the server (or bridge) serves.'),
    path: z.string().startsWith('/').default('/mcp').describe('The MCP endpoint path.'),
    url: z.string().url().optional().describe('An external Streamable HTTP server: nothing is deployed.'),
    env: envList.describe("The server's own environment (values or Secret keys); Agents never see it."),
    egress: z.array(ToolServerEgress).default([]).describe('Where the server may connect (besides DNS).'),
    resources: resources.optional(),
  })
  .superRefine((s, ctx) => {
    const issue = (path: string[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    if (!s.url === !s.image)
      issue([], 'set image (a server in the cluster) or url (an external one), not both');
    if (s.url && (s.command || s.env.length || s.egress.length))
      issue(['url'], 'an external url runs nothing here: command, env and egress need image');
    if (s.url && !/^https?:\/\//.test(s.url)) issue(['url'], 'url must be http:// or https://');
  });
export type ToolServerSpec = z.infer<typeof ToolServerSpec>;

/** The form of a valid spec. */
export const toolServerForm = (s: ToolServerSpec): 'bridged' | 'http' | 'external' =>
  s.url ? 'external' : s.command ? 'bridged' : 'http';
