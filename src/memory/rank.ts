import { createHash } from 'node:crypto';
import { seeded } from '../common/seeded.ts';

/**
 * The pure parts of memory: how a text is keyed for exact duplicates, how a vector is sketched for the
 * coarse scan, how near two vectors are, how two rankings are fused, and what authority a memory keeps.
 */

/** Bits of a vector's SimHash sketch (the `sketch bit(256)` column). */
export const SKETCH_BITS = 256;

/**
 * A text's key for exact duplicates: the same words in the same order, whatever the case, spacing or
 * punctuation around them.
 */
export function bodyKey(body: string): string {
  const words = body.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return createHash('sha256').update(words.join(' ')).digest('hex');
}

const planes = new Map<number, Float32Array>();

/** SKETCH_BITS random ±1 hyperplanes in `dim` dimensions, the same for every process. */
function hyperplanes(dim: number): Float32Array {
  const have = planes.get(dim);
  if (have) return have;
  const next = seeded(0x5eed ^ dim);
  const p = new Float32Array(SKETCH_BITS * dim);
  for (let i = 0; i < p.length; i++) p[i] = next() < 0.5 ? -1 : 1;
  planes.set(dim, p);
  return p;
}

/**
 * A vector's SimHash: one bit per hyperplane, set when the vector lies on its positive side. Two
 * vectors' Hamming distance estimates the angle between them (θ ≈ π · distance / bits), so the nearest
 * sketches are the nearest vectors, roughly: the coarse scan, refined by the exact cosine.
 */
export function sketchOf(v: readonly number[]): string {
  const p = hyperplanes(v.length);
  let bits = '';
  for (let b = 0; b < SKETCH_BITS; b++) {
    let dot = 0;
    const o = b * v.length;
    for (let i = 0; i < v.length; i++) dot += (p[o + i] as number) * (v[i] as number);
    bits += dot >= 0 ? '1' : '0';
  }
  return bits;
}

/** Cosine similarity; 0 when either vector is all zeros or the lengths differ. */
export function cosine(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** How near a new memory must be to an old one to be folded into it (cosine). */
export const NEAR_DUPLICATE = 0.95;

/** The constant of reciprocal rank fusion (Cormack et al.: 60 works across collections). */
export const RRF_K = 60;

/**
 * Reciprocal rank fusion: each ranking gives an item 1 / (k + rank); the sums order the result (ties by
 * the first ranking that has the item). Rankings are lists of ids, best first.
 */
export function fuse(rankings: readonly (readonly string[])[], k = RRF_K): { id: string; score: number }[] {
  const score = new Map<string, number>();
  const first = new Map<string, number>();
  for (const [r, ids] of rankings.entries())
    for (const [i, id] of ids.entries()) {
      score.set(id, (score.get(id) ?? 0) + 1 / (k + i + 1));
      if (!first.has(id)) first.set(id, r * 1e6 + i);
    }
  return [...score.entries()]
    .map(([id, s]) => ({ id, score: s }))
    .sort((a, b) => b.score - a.score || (first.get(a.id) ?? 0) - (first.get(b.id) ?? 0));
}

/**
 * The full-text query of a recall: the text's words, any of them (a question rarely shares all its
 * words with the answer), at most 32; undefined when it has none.
 */
export function anyWordsQuery(text: string): string | undefined {
  const words = [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])].slice(0, 32);
  return words.length ? words.join(' | ') : undefined;
}

/**
 * A lexeme in more than this share of the memories finds too many to rank (ranking is per row matched)
 * and tells little about any of them: it is left out of a recall's full-text query while a rarer one is
 * there (what an inverse document frequency does to a ranking, without ranking what it would bury).
 */
export const COMMON_LEXEME = 0.02;

/**
 * A recall's full-text queries (tsqueries, their lexemes quoted as they are), tried in order until one
 * finds enough, from the text's lexemes (as Postgres parses and stems them, at most 32) and each one's
 * share of the memories (undefined: rare, as the statistics list only the commonest):
 * - with rare lexemes: all of them together, then any of them (the common ones left out);
 * - with common ones only: all of them together, then the two rarest together, then the rarest alone.
 * The first tiers are the most precise and the cheapest (few memories have every word). Empty without
 * lexemes.
 */
export function recallQuery(
  lexemes: readonly string[],
  share: (lexeme: string) => number | undefined,
): string[] {
  const quote = (l: string) => `'${l.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
  const all = [...new Set(lexemes)].slice(0, 32).map((l) => ({ l, share: share(l) ?? 0 }));
  const and = (xs: { l: string }[]) => xs.map((x) => quote(x.l)).join(' & ');
  const rare = all.filter((x) => x.share <= COMMON_LEXEME);
  if (rare.length)
    return rare.length > 1 ? [and(rare), rare.map((x) => quote(x.l)).join(' | ')] : [and(rare)];
  const byShare = [...all].sort((x, y) => x.share - y.share);
  const tiers = [and(all), and(byShare.slice(0, 2)), and(byShare.slice(0, 1))].filter((t) => t);
  return [...new Set(tiers)];
}

/**
 * What a memory may claim when recalled: never an instruction. What the agent concluded from its own
 * and its operator's words is its note; anything drawn from outside content (a webhook's message, a
 * tool's output, a callback) stays external evidence, however often it is saved again.
 */
export type MemoryAuthority = 'agent_note' | 'external_evidence';

export function memoryAuthority(sourceAuthority: string): MemoryAuthority {
  return sourceAuthority === 'operator_instruction' ||
    sourceAuthority === 'runtime_instruction' ||
    sourceAuthority === 'agent_note'
    ? 'agent_note'
    : 'external_evidence';
}

/** The weaker of two authorities: a memory folded into another never gains trust. */
export function weaker(a: MemoryAuthority, b: MemoryAuthority): MemoryAuthority {
  return a === 'external_evidence' || b === 'external_evidence' ? 'external_evidence' : 'agent_note';
}
