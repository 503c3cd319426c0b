import type { Blackboard } from '../../blackboard/client.ts';
import { BlackboardDataError } from '../../blackboard/codec.ts';
import type { Claim, ClaimType } from '../../blackboard/types.ts';
import type { Logger } from '../../common/logger.ts';
import { type AgentStatus as LlmAgentStatus, readAgentStatuses } from '../../llm/status.ts';
import { currentGrant, outputId } from '../../pup/decide.ts';
import { nowIso } from '../runtime/status.ts';
import type { HoltBoards, HoltRef } from './registry.ts';
import { keyOf } from './resources.ts';

/** `status.budget` of an Agent (src/api/status.ts). */
export interface AgentBudget {
  windowStart?: string;
  calls: number;
  tokens: number;
  costUsd: number;
  paused: boolean;
}

/** What an Agent's status reports from its Holt's Redis (values that change without a Kubernetes event). */
export interface AgentRuntime {
  claimsInFlight: number;
  /** Absent for agents that publish no `agent_status` hash (command agents). */
  budget?: AgentBudget;
}

/** Reads an agent's runtime values from its Holt's stores. Throws when the store is unreachable. */
export interface HoltRuntimeReader {
  read(holt: HoltRef, role: string): Promise<AgentRuntime>;
  close?(): Promise<void>;
}

/**
 * The grant `role` holds on `claim` in its current phase and has not answered yet, if any: the
 * pup's own rule (currentGrant: review/parallel lists, the exclusive agent, a feedback claim's
 * exclusive agent), minus grants the orchestrator already recorded as received and dormant claims.
 * Whether the output exists is checked separately (the deterministic `outputId`, as the pup does).
 */
export function openGrant(claim: Claim, role: string): ClaimType | null {
  if (claim.dormant_reason) return null;
  const t = currentGrant(claim, role);
  if (!t) return null;
  if (claim.status !== 'pending_assignment' && claim.phase_state?.received[role]) return null;
  return t;
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
  };
}

/** Active claims of a Holt, skipping malformed ones (one bad hash must not hide the others). */
async function activeClaims(bb: Blackboard): Promise<Claim[]> {
  const ids = await bb.activeClaimIds();
  try {
    return (await bb.getClaims(ids)).flatMap((c) => (c ? [c.claim] : []));
  } catch (e) {
    if (!(e instanceof BlackboardDataError)) throw e;
    const out: Claim[] = [];
    for (const id of ids) {
      const c = await bb.getClaim(id).catch(() => null);
      if (c) out.push(c.claim);
    }
    return out;
  }
}

/**
 * The real reader, on the Holt's own Redis (connections shared with the registry writer). The
 * active claims of a Holt are read once per `maxAgeMs` and shared by its agents; the output check
 * and the status hash are per role.
 */
export class RedisRuntimeReader implements HoltRuntimeReader {
  readonly #boards: HoltBoards;
  readonly #maxAgeMs: number;
  readonly #snapshots = new Map<string, { at: number; claims: Promise<Claim[]> }>();
  readonly #log?: Logger;

  constructor(boards: HoltBoards, opts: { maxAgeMs?: number; log?: Logger } = {}) {
    this.#boards = boards;
    this.#maxAgeMs = opts.maxAgeMs ?? 1_000;
    this.#log = opts.log;
  }

  async read(holt: HoltRef, role: string): Promise<AgentRuntime> {
    const bb = await this.#boards.board(holt);
    const claims = await this.#claims(holt, bb);
    const grants = claims.flatMap((c) => {
      const t = openGrant(c, role);
      return t ? [outputId(bb.instance, c.id, role, t)] : [];
    });
    const [done, statuses] = await Promise.all([
      bb.artefactsExist(grants),
      readAgentStatuses(bb.redis, bb.instance, [role]),
    ]);
    const s = statuses.get(role);
    this.#log?.debug({ event_type: 'agent_runtime_read', holt: keyOf(holt.namespace, holt.name), role });
    return { claimsInFlight: done.filter((d) => !d).length, ...(s ? { budget: budgetOf(s) } : {}) };
  }

  #claims(holt: HoltRef, bb: Blackboard): Promise<Claim[]> {
    const key = keyOf(holt.namespace, holt.name);
    const now = Date.now();
    const have = this.#snapshots.get(key);
    if (have && now - have.at < this.#maxAgeMs) return have.claims;
    const claims = activeClaims(bb);
    this.#snapshots.set(key, { at: now, claims });
    // A failed read is not shared: the next caller tries again.
    claims.catch(() => {
      if (this.#snapshots.get(key)?.claims === claims) this.#snapshots.delete(key);
    });
    return claims;
  }

  async close(): Promise<void> {
    this.#snapshots.clear();
    await this.#boards.close();
  }
}
