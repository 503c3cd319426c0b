import type { Redis } from 'ioredis';
import { z } from 'zod';
import { readJsonKey, writeJsonKey } from './json-key.ts';

/**
 * What an LLM agent's pup knows of its MCP servers (`holt:{i}:mcp_status:{role}`, an extension, a
 * JSON string): each server's state, the tools it offers (names after the allowlist), why it is not
 * connected, and since when. Written by the pup's hub on a change only (src/llm/mcp/status.ts); read by
 * the operator (the Agent's `status.mcpServers`) and `holt status`. Pups of a role share the key: with
 * several (a worker pool), the last to see a change says.
 */
export const mcpStatusKey = (instance: string, role: string) => `holt:${instance}:mcp_status:${role}`;

export const MCP_STATES = ['connecting', 'connected', 'unreachable', 'refused'] as const;
export type McpState = (typeof MCP_STATES)[number];

export const McpServerReport = z.object({
  name: z.string().min(1).max(64),
  /** connecting: no first answer yet; unreachable: it may come back (retried); refused: it said no, or cannot start. */
  state: z.enum(MCP_STATES),
  tools: z.array(z.string().max(256)).max(500).default([]),
  /** Why it is not connected: a short fixed text per cause, never a secret. */
  reason: z.string().max(500).optional(),
  /** When its state last changed. */
  since_ms: z.number().int().nonnegative(),
});
export type McpServerReport = z.infer<typeof McpServerReport>;

export const McpStatusReport = z.object({
  updated_at_ms: z.number().int().nonnegative(),
  servers: z.array(McpServerReport).max(100),
});
export type McpStatusReport = z.infer<typeof McpStatusReport>;

export async function writeMcpStatus(
  redis: Redis,
  instance: string,
  role: string,
  r: McpStatusReport,
): Promise<void> {
  await writeJsonKey(redis, mcpStatusKey(instance, role), r);
}

/** The role's last report, or null before any. Throws BlackboardDataError if malformed. */
export function readMcpStatus(redis: Redis, instance: string, role: string): Promise<McpStatusReport | null> {
  return readJsonKey(redis, mcpStatusKey(instance, role), McpStatusReport, 'MCP status');
}

/** Reports of the given roles; a role without one (or with a malformed one) is left out. */
export async function readMcpStatuses(
  redis: Redis,
  instance: string,
  roles: string[],
): Promise<Map<string, McpStatusReport>> {
  const out = new Map<string, McpStatusReport>();
  for (const role of roles) {
    const r = await readMcpStatus(redis, instance, role).catch(() => null);
    if (r) out.set(role, r);
  }
  return out;
}
