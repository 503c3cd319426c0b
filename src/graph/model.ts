import { isApproval } from '../blackboard/review.ts';
import type { Artefact, Claim, StructuralType } from '../blackboard/types.ts';

/** One artefact as drawn: what it is, who made it, and where the work on it stands. */
export interface GraphNode {
  id: string;
  type: string;
  structural: StructuralType;
  version: number;
  producer: string;
  /** A Review's verdict on what it reviewed (Holt's rule: `{}` or `[]` approves). */
  verdict?: 'approved' | 'rejected';
  /** The claim on this artefact, when it has one. */
  claim?: { status: Claim['status']; grantees: string[] };
  /** Work is on this artefact now: its claim is open and granted to someone. */
  active: boolean;
}

export interface GraphEdge {
  from: string;
  to: string;
  /** source: `to` was made from `from`; rework: `to` is the next version of `from`. */
  kind: 'source' | 'rework';
  /** On a Review's edge from what it reviewed: the verdict. */
  label?: string;
}

export interface ArtefactGraph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  /** The goals (roots) of the workflows drawn. */
  goals: string[];
}

const OPEN: ReadonlySet<Claim['status']> = new Set([
  'pending_review',
  'pending_parallel',
  'pending_exclusive',
  'pending_assignment',
]);

/** Who holds the claim's grant in its current phase. */
function grantees(c: Claim): string[] {
  if (c.status === 'pending_review') return c.granted_review_agents;
  if (c.status === 'pending_parallel') return c.granted_parallel_agents;
  if (c.status === 'pending_exclusive') return c.granted_exclusive_agent ? [c.granted_exclusive_agent] : [];
  return [];
}

/** The artefacts of the workflow that `goal` starts: the goal and everything made from it, transitively. */
export function workflowOf(artefacts: readonly Artefact[], goal: string): Artefact[] {
  const children = new Map<string, string[]>();
  for (const a of artefacts)
    for (const s of a.source_artefacts) children.set(s, [...(children.get(s) ?? []), a.id]);
  const keep = new Set([goal]);
  const todo = [goal];
  for (let id = todo.pop(); id !== undefined; id = todo.pop())
    for (const c of children.get(id) ?? [])
      if (!keep.has(c)) {
        keep.add(c);
        todo.push(c);
      }
  return artefacts.filter((a) => keep.has(a.id));
}

/**
 * The artefact graph: a node per artefact, an edge per source, a dashed rework edge from each version
 * to the next of the same logical artefact, verdicts on Reviews, and the claims in progress.
 * `claims` maps an artefact id to its claim.
 */
export function artefactGraph(
  artefacts: readonly Artefact[],
  claims: ReadonlyMap<string, Claim>,
): ArtefactGraph {
  const byId = new Map(artefacts.map((a) => [a.id, a]));
  const ordered = [...artefacts].sort(
    (a, b) => a.created_at_ms - b.created_at_ms || a.id.localeCompare(b.id),
  );
  const nodes = ordered.map((a): GraphNode => {
    const c = claims.get(a.id);
    const granted = c && OPEN.has(c.status) ? grantees(c) : [];
    return {
      id: a.id,
      type: a.type,
      structural: a.structural_type,
      version: a.version,
      producer: a.produced_by_role,
      ...(a.structural_type === 'Review'
        ? { verdict: isApproval(a.payload) ? ('approved' as const) : ('rejected' as const) }
        : {}),
      ...(c ? { claim: { status: c.status, grantees: granted } } : {}),
      active: granted.length > 0,
    };
  });
  const edges: GraphEdge[] = [];
  for (const a of ordered)
    for (const s of a.source_artefacts)
      if (byId.has(s))
        edges.push({
          from: s,
          to: a.id,
          kind: 'source',
          ...(a.structural_type === 'Review'
            ? { label: isApproval(a.payload) ? 'approved' : 'changes asked' }
            : {}),
        });
  // Rework: version n+1 of a logical artefact follows version n (when both are drawn).
  const versions = new Map<string, Artefact[]>();
  for (const a of ordered) versions.set(a.logical_id, [...(versions.get(a.logical_id) ?? []), a]);
  for (const line of versions.values()) {
    const sorted = line.sort((a, b) => a.version - b.version);
    for (let i = 1; i < sorted.length; i++)
      edges.push({
        from: sorted[i - 1]!.id,
        to: sorted[i]!.id,
        kind: 'rework',
        label: `v${sorted[i]!.version}`,
      });
  }
  const goals = ordered.filter((a) => a.source_artefacts.every((s) => !byId.has(s))).map((a) => a.id);
  return { nodes, edges, goals };
}
