import { readAgentLoad } from '../blackboard/agent-load.ts';
import { readAgentStatuses } from '../blackboard/agent-status.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { getAgents } from '../blackboard/registry.ts';
import type { Artefact } from '../blackboard/types.ts';

/**
 * The console's agents page: each registered role with its load, its model's budget use and pause,
 * its living state, memory and image, and its last Failures with their error class. The registry and
 * the status hashes are small and change without an artefact, so they are read again every few
 * seconds; the Failures come from the artefact stream.
 */

export interface AgentError {
  type: string;
  /** The Failure's `error_class` (src/blackboard/error-class.ts), when it names one. */
  errorClass?: string;
  /** The Failure's text, cut: untrusted, shown as text. */
  text: string;
  atMs: number;
}

export interface AgentRow {
  role: string;
  kind: string;
  image?: string;
  inFlight: number;
  model?: string;
  state?: 'active' | 'paused';
  pausedReason?: string;
  pausedClass?: string;
  calls?: number;
  tokens?: number;
  costUsd?: number;
  consecutiveErrors?: number;
  life?: string;
  memories?: number;
  lastErrors: AgentError[];
}

const KEEP = 3;
const TEXT = 300;

/** The last Failures of each role, from the artefact stream. Pure. */
export class FailureLog {
  readonly #byRole = new Map<string, AgentError[]>();

  add(a: Artefact): boolean {
    if (a.structural_type !== 'Failure') return false;
    let errorClass: string | undefined;
    try {
      const p = JSON.parse(a.payload) as { error_class?: unknown };
      if (typeof p.error_class === 'string') errorClass = p.error_class;
    } catch {
      // a Failure whose payload is plain text names no class
    }
    const list = [
      {
        type: a.type,
        text: a.payload.slice(0, TEXT),
        atMs: a.created_at_ms,
        ...(errorClass ? { errorClass } : {}),
      },
      ...(this.#byRole.get(a.produced_by_role) ?? []),
    ].slice(0, KEEP);
    this.#byRole.set(a.produced_by_role, list);
    return true;
  }

  of(role: string): AgentError[] {
    return this.#byRole.get(role) ?? [];
  }
}

/** The rows now: the registry, each role's status hash and the published load. */
export async function readAgents(bb: Blackboard, failures: FailureLog): Promise<AgentRow[]> {
  const { agents } = await getAgents(bb);
  const roles = agents.map((a) => a.role);
  const [statuses, load, images] = await Promise.all([
    readAgentStatuses(bb.redis, bb.instance, roles),
    readAgentLoad(bb.redis, bb.k.agentLoad).catch(() => null),
    bb.redis.hgetall(bb.k.agentImages),
  ]);
  return agents.map((a): AgentRow => {
    const s = statuses.get(a.role);
    const image = images[a.role] ?? a.image_id;
    return {
      role: a.role,
      kind: a.kind,
      inFlight: load?.in_flight[a.role] ?? 0,
      lastErrors: failures.of(a.role),
      ...(image ? { image } : {}),
      ...(s
        ? {
            model: s.model,
            state: s.state,
            calls: s.calls_in_window,
            tokens: s.tokens_in_window,
            costUsd: s.cost_usd_total,
            consecutiveErrors: s.consecutive_errors,
            ...(s.paused_reason ? { pausedReason: s.paused_reason } : {}),
            ...(s.paused_class ? { pausedClass: s.paused_class } : {}),
            ...(s.life_state ? { life: s.life_state } : {}),
            ...(s.memories !== undefined ? { memories: s.memories } : {}),
          }
        : {}),
    };
  });
}
