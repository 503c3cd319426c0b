import { type AgentLoad, readAgentLoad } from '../../blackboard/agent-load.ts';
import { type AgentStatus as LlmAgentStatus, readAgentStatuses } from '../../blackboard/agent-status.ts';
import type { Blackboard } from '../../blackboard/client.ts';
import { BlackboardDataError } from '../../blackboard/codec.ts';
import { type McpStatusReport, readMcpStatus } from '../../blackboard/mcp-status.ts';
import { type RetentionReport, readRetentionReport } from '../../blackboard/retention-report.ts';
import type { Logger } from '../../common/logger.ts';
import { nowIso } from '../kube/status.ts';
import type { HoltBoards, HoltRef } from './registry.ts';
import { keyOf } from './resources.ts';

/** `status.budget` of an Agent (src/api/status.ts). */
export interface AgentBudget {
  windowStart?: string;
  calls: number;
  tokens: number;
  costUsd: number;
  paused: boolean;
  pausedReason?: string;
  pausedClass?: string;
}

/** `status.life` of a living Agent: its work items by readiness and its last message's time. */
export interface AgentLife {
  state: string;
  items: { runnable: number; waiting: number; blocked: number; completed: number };
  lastMessageTime?: string;
}

/** The life fields of the `agent_status` hash, when the agent lives. */
export function lifeOf(s: LlmAgentStatus): AgentLife | undefined {
  if (!s.life_state) return undefined;
  const n = (v: number) => Math.max(0, Math.round(v));
  return {
    state: s.life_state,
    items: {
      runnable: n(s.items_runnable),
      waiting: n(s.items_waiting),
      blocked: n(s.items_blocked),
      completed: n(s.items_completed),
    },
    ...(s.last_message_at_ms > 0 ? { lastMessageTime: nowIso(s.last_message_at_ms) } : {}),
  };
}

/** `status.memory` of an Agent with a long-term memory: its live memories and how often they were recalled. */
export interface AgentMemory {
  memories: number;
  recalls: number;
}

/** The memory fields of the `agent_status` hash, when the agent has a memory. */
export function memoryOf(s: LlmAgentStatus): AgentMemory | undefined {
  if (s.memories === undefined || !Number.isFinite(s.memories)) return undefined;
  const n = (v: number) => (Number.isFinite(v) ? Math.max(0, Math.round(v)) : 0);
  return { memories: n(s.memories), recalls: n(s.memory_recalls) };
}

/** What an Agent's status reports from its Holt's Redis (values that change without a Kubernetes event). */
export interface AgentFigures {
  /** The role's open grants lacking output, as the Holt's leader last published them. */
  claimsInFlight: number;
  /** No leader has published the count for LOAD_STALE_MS: it may be out of date. */
  loadStale?: boolean;
  /** Absent for agents that publish no `agent_status` hash (command agents). */
  budget?: AgentBudget;
  /** Absent for agents that do not live. */
  life?: AgentLife;
  /** Absent for agents without a long-term memory. */
  memory?: AgentMemory;
  /** Its pup's MCP servers (`mcp_status:{role}`); absent before a pup reported (or a bad report). */
  mcp?: McpStatusReport;
}

/** `status.mcpServers`: one entry per MCP server of the spec (src/api/status.ts). */
export interface McpServerStatus {
  name: string;
  ready: boolean;
  message: string;
  tools?: string[];
  lastChangeTime?: string;
}

/**
 * The spec's inline MCP servers as the pup reported them (pure), in the spec's order; one the report
 * lacks (a pup still on the old spec) is "not reported yet". Servers from ToolServers are left out:
 * `status.toolServers` shows those.
 */
export function mcpServersOf(r: McpStatusReport, inline: string[]): McpServerStatus[] {
  return inline.map((name) => {
    const s = r.servers.find((x) => x.name === name);
    if (!s) return { name, ready: false, message: 'not reported by its pup yet' };
    const when = s.since_ms > 0 ? { lastChangeTime: nowIso(s.since_ms) } : {};
    if (s.state === 'connected') {
      const n = s.tools.length;
      return {
        name,
        ready: true,
        message: `connected: ${n} tool${n === 1 ? '' : 's'}`,
        tools: s.tools,
        ...when,
      };
    }
    return { name, ready: false, message: s.reason ? `${s.state}: ${s.reason}` : s.state, ...when };
  });
}

/** The Ready note of an Agent whose MCP servers are down (unreachable or refused): each named, with why. */
export function mcpServerNote(ms: McpServerStatus[]): string {
  const down = ms.filter((m) => /^(unreachable|refused)\b/.test(m.message));
  return down.length ? `; MCP server ${down.map((m) => `${m.name} ${m.message}`).join('; ')}` : '';
}

/** What a Holt's status reports from its Redis: items set aside, and the leader's retention report. */
export interface HoltData {
  quarantined: number;
  /** Null before the leader's first retention pass (or when its report does not parse). */
  retention: RetentionReport | null;
}

/** Reads runtime values from a Holt's stores. Throws when the store is unreachable. */
export interface HoltFiguresReader {
  read(holt: HoltRef, role: string): Promise<AgentFigures>;
  /** The Holt's own values; without it the Holt status carries none. */
  readHolt?(holt: HoltRef): Promise<HoltData>;
  close?(): Promise<void>;
}

/** The LLM pup's `agent_status` hash as `status.budget`; the window start as of its last write. */
export function budgetOf(s: LlmAgentStatus): AgentBudget {
  return {
    ...(s.window_ms > 0 && s.updated_at_ms > 0
      ? { windowStart: nowIso(Math.max(0, s.updated_at_ms - s.window_ms)) }
      : {}),
    calls: Math.max(0, Math.round(s.calls_in_window)),
    tokens: Math.max(0, Math.round(s.tokens_in_window)),
    costUsd: Math.max(0, s.cost_usd_total),
    paused: s.state === 'paused',
    ...(s.state === 'paused' && s.paused_reason ? { pausedReason: s.paused_reason.slice(0, 500) } : {}),
    ...(s.state === 'paused' && s.paused_class ? { pausedClass: s.paused_class } : {}),
  };
}

/** Published load older than this means no orchestrator leads: the count is kept, with a note. */
export const LOAD_STALE_MS = 60_000;

/**
 * The real reader, on the Holt's own Redis (connections shared with the registry writer). It reads
 * only what the operator's Redis user may: the load the leader publishes (`agent_load`, read once
 * per `maxAgeMs` and shared by the Holt's agents), the role's `agent_status` hash and its pup's
 * `mcp_status` report; for the Holt,
 * the quarantine's size and the retention report. Never a claim or an artefact.
 */
export class RedisFiguresReader implements HoltFiguresReader {
  readonly #boards: HoltBoards;
  readonly #maxAgeMs: number;
  readonly #snapshots = new Map<string, { at: number; load: Promise<AgentLoad | null> }>();
  readonly #log?: Logger;

  constructor(boards: HoltBoards, opts: { maxAgeMs?: number; log?: Logger } = {}) {
    this.#boards = boards;
    this.#maxAgeMs = opts.maxAgeMs ?? 1_000;
    this.#log = opts.log;
  }

  async read(holt: HoltRef, role: string): Promise<AgentFigures> {
    const bb = await this.#boards.board(holt);
    const [load, statuses, mcp] = await Promise.all([
      this.#load(holt, bb),
      readAgentStatuses(bb.redis, bb.instance, [role]),
      readMcpStatus(bb.redis, bb.instance, role).catch((e: unknown) => {
        // A bad report is no report; an external Redis whose ACL predates the key refuses it (NOPERM):
        // the other figures still count.
        if (e instanceof BlackboardDataError || /NOPERM/.test(String(e))) return null;
        throw e;
      }),
    ]);
    const s = statuses.get(role);
    this.#log?.debug({ event_type: 'agent_runtime_read', holt: keyOf(holt.namespace, holt.name), role });
    return {
      claimsInFlight: load?.in_flight[role] ?? 0,
      ...(load && Date.now() - load.updated_at_ms > LOAD_STALE_MS ? { loadStale: true } : {}),
      ...(s ? { budget: budgetOf(s) } : {}),
      ...(s && lifeOf(s) ? { life: lifeOf(s) } : {}),
      ...(s && memoryOf(s) ? { memory: memoryOf(s) } : {}),
      ...(mcp ? { mcp } : {}),
    };
  }

  async readHolt(holt: HoltRef): Promise<HoltData> {
    const bb = await this.#boards.board(holt);
    const [quarantined, retention] = await Promise.all([
      bb.redis.hlen(bb.k.quarantine),
      readRetentionReport(bb.redis, bb.k.retention).catch((e: unknown) => {
        if (e instanceof BlackboardDataError) return null; // a bad report is no report; the store is fine
        throw e;
      }),
    ]);
    return { quarantined, retention };
  }

  #load(holt: HoltRef, bb: Blackboard): Promise<AgentLoad | null> {
    const key = keyOf(holt.namespace, holt.name);
    const now = Date.now();
    const have = this.#snapshots.get(key);
    if (have && now - have.at < this.#maxAgeMs) return have.load;
    const load = readAgentLoad(bb.redis, bb.k.agentLoad);
    this.#snapshots.set(key, { at: now, load });
    // A failed read is not shared: the next caller tries again.
    load.catch(() => {
      if (this.#snapshots.get(key)?.load === load) this.#snapshots.delete(key);
    });
    return load;
  }

  async close(): Promise<void> {
    this.#snapshots.clear();
    await this.#boards.close();
  }
}
