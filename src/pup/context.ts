import type { Artefact } from '../blackboard/types.ts';

export const MAX_CONTEXT_DEPTH = 10;
const KEPT = new Set(['Standard', 'Answer', 'Review']);

/** One level's fetch: each id's artefact and the latest version of its thread (null when not newer). */
export type FetchLevel = (
  ids: string[],
) => Promise<{ found: { artefact: Artefact | null; latest: Artefact | null }[]; malformed: string[] }>;

export interface ContextResult {
  chain: Artefact[];
  /** Round trips made (one per level). */
  levels: number;
  missing: string[];
  malformed: string[];
}

/**
 * Holt's context walk (docs/protocol.md row 24): BFS from `roots`, at most `maxDepth` levels, each id
 * replaced by the latest version of its thread, de-duplicated by logical id (first seen wins), a visited
 * set so a malformed cycle terminates, one fetch per level. Only Standard/Answer/Review are kept, oldest first.
 */
export async function assembleContext(
  roots: string[],
  fetchLevel: FetchLevel,
  maxDepth = MAX_CONTEXT_DEPTH,
): Promise<ContextResult> {
  const visited = new Set<string>();
  const byLogical = new Map<string, { a: Artefact; seq: number }>();
  const missing: string[] = [];
  const malformed: string[] = [];
  let seq = 0;
  let frontier = unique(roots, visited);
  let levels = 0;
  while (frontier.length && levels < maxDepth) {
    levels++;
    const { found, malformed: bad } = await fetchLevel(frontier);
    malformed.push(...bad);
    const next: string[] = [];
    found.forEach(({ artefact, latest }, i) => {
      if (!artefact) {
        if (!bad.includes(frontier[i] as string)) missing.push(frontier[i] as string);
        return;
      }
      const a = latest && latest.version > artefact.version ? latest : artefact;
      visited.add(a.id);
      if (byLogical.has(a.logical_id)) return;
      byLogical.set(a.logical_id, { a, seq: seq++ });
      next.push(...a.source_artefacts);
    });
    frontier = unique(next, visited);
  }
  return { chain: orderContext([...byLogical.values()]), levels, missing, malformed };
}

function unique(ids: string[], visited: Set<string>): string[] {
  const out: string[] = [];
  for (const id of ids) {
    if (visited.has(id)) continue;
    visited.add(id);
    out.push(id);
  }
  return out;
}

/** Kept types only, oldest first (created_at_ms; ties in discovery order, so the result is stable). */
export function orderContext(entries: { a: Artefact; seq: number }[]): Artefact[] {
  return entries
    .filter((e) => KEPT.has(e.a.structural_type))
    .sort((x, y) => x.a.created_at_ms - y.a.created_at_ms || x.seq - y.seq)
    .map((e) => e.a);
}
