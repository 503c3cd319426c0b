import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * An LLM agent's status, written by its runtime (src/llm) and read by `holt status` and the operator
 * (the Agent's `status.budget`, `status.life` and `status.memory`): Redis hash
 * `holt:{instance}:agent_status:{role}` (extension; Holt ignores it), rewritten after every call.
 */
export const agentStatusKey = (instance: string, role: string) => `holt:${instance}:agent_status:${role}`;

export const AgentStatus = z.object({
  state: z.enum(['active', 'paused']),
  paused_reason: z.string().default(''),
  /** The class of the error that paused it (error-class.ts), '' when active. */
  paused_class: z.string().default(''),
  paused_until_ms: z.coerce.number().default(0),
  model: z.string().default(''),
  calls_in_window: z.coerce.number().default(0),
  tokens_in_window: z.coerce.number().default(0),
  window_ms: z.coerce.number().default(0),
  calls_limit: z.coerce.number().default(0),
  tokens_limit: z.coerce.number().default(0),
  cost_usd_total: z.coerce.number().default(0),
  cost_usd_limit: z.coerce.number().default(0),
  consecutive_errors: z.coerce.number().default(0),
  updated_at_ms: z.coerce.number().default(0),
  // A living agent's (src/life), written by its life loop: '' when the agent does not live.
  life_state: z.string().default(''),
  items_runnable: z.coerce.number().default(0),
  items_waiting: z.coerce.number().default(0),
  items_blocked: z.coerce.number().default(0),
  items_completed: z.coerce.number().default(0),
  last_message_at_ms: z.coerce.number().default(0),
  // Its long-term memory's (src/memory), written by the pup after each save and recall (and at its start):
  // absent when the agent has no memory.
  /** The live memories it wrote (its own and those it saved for the Holt). */
  memories: z.coerce.number().optional(),
  /** How often those were recalled in all (by it, and Holt-wide ones by any agent). */
  memory_recalls: z.coerce.number().default(0),
});
export type AgentStatus = z.infer<typeof AgentStatus>;

/** The life fields of the status hash (its other fields are the model plugin's). */
export type LifeStatus = Pick<
  AgentStatus,
  | 'life_state'
  | 'items_runnable'
  | 'items_waiting'
  | 'items_blocked'
  | 'items_completed'
  | 'last_message_at_ms'
>;

export async function writeLifeStatus(
  redis: Redis,
  instance: string,
  role: string,
  s: LifeStatus,
): Promise<void> {
  await redis.hset(
    agentStatusKey(instance, role),
    Object.fromEntries(
      Object.entries(s)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, String(v)]),
    ),
  );
}

/** The memory fields of the status hash, written by the pup of an agent with a long-term memory. */
export type MemoryStatus = Required<Pick<AgentStatus, 'memories' | 'memory_recalls'>>;
export const MEMORY_STATUS_FIELDS = ['memories', 'memory_recalls'] as const satisfies (keyof MemoryStatus)[];

export async function writeMemoryStatus(
  redis: Redis,
  instance: string,
  role: string,
  s: MemoryStatus,
): Promise<void> {
  await redis.hset(agentStatusKey(instance, role), {
    memories: String(s.memories),
    memory_recalls: String(s.memory_recalls),
  });
}

/** An agent without a memory (any more): its memory fields go, so no count outlives the spec that had it. */
export async function clearMemoryStatus(redis: Redis, instance: string, role: string): Promise<void> {
  await redis.hdel(agentStatusKey(instance, role), ...MEMORY_STATUS_FIELDS);
}

export async function writeAgentStatus(
  redis: Redis,
  instance: string,
  role: string,
  /** The model plugin's fields: the life loop and the long-term memory write the others. */
  s: Omit<AgentStatus, keyof LifeStatus | keyof MemoryStatus>,
): Promise<void> {
  await redis.hset(
    agentStatusKey(instance, role),
    Object.fromEntries(
      Object.entries(s)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, String(v)]),
    ),
  );
}

/** Statuses of the given roles; roles without one (command agents) are left out. */
export async function readAgentStatuses(
  redis: Redis,
  instance: string,
  roles: string[],
): Promise<Map<string, AgentStatus>> {
  const out = new Map<string, AgentStatus>();
  for (const role of roles) {
    const h = await redis.hgetall(agentStatusKey(instance, role));
    if (!Object.keys(h).length) continue;
    const r = AgentStatus.safeParse(h);
    if (r.success) out.set(role, r.data);
  }
  return out;
}
