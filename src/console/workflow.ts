import type pg from 'pg';
import { z } from 'zod';
import { claimsForArtefacts } from '../blackboard/claim-engine.ts';
import type { Blackboard } from '../blackboard/client.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { artefactGraph } from '../graph/model.ts';
import { toDot } from '../graph/render.ts';
import { dotToSvg } from '../graph/svg.ts';

/**
 * One workflow's page: its artefacts (read by id: this workflow's, never the whole board) with their
 * claims, each as a timeline entry (when it came, how long after the goal, who made it, its claim's
 * state, the agents' bids on it and who it was granted to), and its graph as `holt graph` draws it. Payloads are not in the list: one is read when a
 * person opens it.
 */

export interface TimelineEntry {
  id: string;
  type: string;
  structural: Artefact['structural_type'];
  role: string;
  version: number;
  atMs: number;
  /** Since the goal. */
  offsetMs: number;
  /** Until the next artefact of the workflow (the last: none). */
  gapMs?: number;
  /** Its claim: its state, who it is granted to, and each agent's bid on it (role → bid). */
  claim?: { status: Claim['status']; granted: string[]; bids: Record<string, string> };
  /** The model calls and tool runs of the LLM turns that answered its claim (with the Holt's Postgres). */
  steps?: StepView[];
}

/** One model call or tool run of a turn, as the timeline shows it. */
export interface StepView {
  atMs: number;
  role: string;
  kind: 'model' | 'tool';
  /** The model, or the tool's name. */
  what: string;
  /** A model call's tokens, or a tool run's outcome (ok, error, refused, …). */
  detail: string;
  error?: string;
}

const StepRow = z.object({
  claim_id: z.string(),
  role: z.string(),
  kind: z.enum(['llm', 'tool']),
  metadata: z.record(z.string(), z.unknown()).catch({}),
  error: z.string().nullable(),
  at_ms: z.coerce.number(),
});

/** A step row as the timeline shows it (pure). */
export function stepView(r: z.infer<typeof StepRow>): StepView {
  const m = r.metadata;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  const usage = m.llm_usage as { total_tokens?: unknown } | undefined;
  return {
    atMs: r.at_ms,
    role: r.role,
    kind: r.kind === 'llm' ? 'model' : 'tool',
    what: r.kind === 'llm' ? str(m.model) || 'model' : str(m.tool) || 'tool',
    detail:
      r.kind === 'llm'
        ? typeof usage?.total_tokens === 'number'
          ? `${usage.total_tokens} tokens`
          : str(m.error)
            ? 'failed'
            : ''
        : str(m.outcome),
    ...(r.error || str(m.error) ? { error: r.error ?? str(m.error) } : {}),
  };
}

/** The model calls and tool runs of the turns that answered these claims (claim id → steps, in order). */
export async function readSteps(
  pool: pg.Pool,
  instance: string,
  claimIds: string[],
): Promise<Map<string, StepView[]>> {
  const out = new Map<string, StepView[]>();
  if (!claimIds.length) return out;
  const r = await pool.query(
    `SELECT t.claim_id, t.role, s.kind, s.metadata, s.error,
       (EXTRACT(EPOCH FROM s.started_at) * 1000)::bigint AS at_ms
     FROM holt.agent_turns t JOIN holt.agent_steps s ON s.turn_id = t.turn_id
     WHERE t.instance = $1 AND t.claim_id = ANY($2) AND s.kind IN ('llm', 'tool')
     ORDER BY s.started_at, s.seq LIMIT 1000`,
    [instance, claimIds],
  );
  for (const row of r.rows) {
    const p = StepRow.safeParse(row);
    if (!p.success) continue;
    const list = out.get(p.data.claim_id) ?? [];
    list.push(stepView(p.data));
    out.set(p.data.claim_id, list);
  }
  return out;
}

/** The workflow's artefacts and their claims (artefact id → claim). */
export async function readWorkflow(
  bb: Blackboard,
  ids: string[],
): Promise<{ artefacts: Artefact[]; claims: Map<string, Claim>; bids: Map<string, Record<string, string>> }> {
  const artefacts = (await bb.getArtefacts(ids))
    .filter((a): a is Artefact => a !== null)
    .sort((a, b) => a.created_at_ms - b.created_at_ms || a.id.localeCompare(b.id));
  const claims = await claimsForArtefacts(
    bb,
    artefacts.map((a) => a.id),
  );
  // Each claim's bids (claim id → role → bid), read together.
  const bids = new Map(
    await Promise.all([...claims.values()].map(async (c) => [c.id, await bb.getBids(c.id)] as const)),
  );
  return { artefacts, claims, bids };
}

/** The timeline of a workflow's artefacts, oldest first. Pure. */
export function timelineOf(
  artefacts: readonly Artefact[],
  claims: ReadonlyMap<string, Claim>,
  bids: ReadonlyMap<string, Record<string, string>> = new Map(),
  steps: ReadonlyMap<string, StepView[]> = new Map(),
): TimelineEntry[] {
  const start = artefacts[0]?.created_at_ms ?? 0;
  return artefacts.map((a, i) => {
    const c = claims.get(a.id);
    const next = artefacts[i + 1];
    return {
      id: a.id,
      type: a.type,
      structural: a.structural_type,
      role: a.produced_by_role,
      version: a.version,
      atMs: a.created_at_ms,
      offsetMs: a.created_at_ms - start,
      ...(next ? { gapMs: next.created_at_ms - a.created_at_ms } : {}),
      ...(c
        ? {
            claim: {
              status: c.status,
              granted: [
                ...c.granted_review_agents,
                ...c.granted_parallel_agents,
                ...(c.granted_exclusive_agent ? [c.granted_exclusive_agent] : []),
              ],
              bids: bids.get(c.id) ?? {},
            },
            ...(steps.get(c.id)?.length ? { steps: steps.get(c.id) } : {}),
          }
        : {}),
    };
  });
}

/** The workflow's graph as SVG (Graphviz escapes every label). */
export function graphSvg(artefacts: readonly Artefact[], claims: ReadonlyMap<string, Claim>, title: string) {
  return dotToSvg(toDot(artefactGraph(artefacts, claims), title));
}
