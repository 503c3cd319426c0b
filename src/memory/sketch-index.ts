import { SKETCH_BITS } from './rank.ts';

/**
 * The coarse scan of the vector ranking, in the process that searches: every sketch of one instance and
 * embedding model, 32 bytes each (100 000 memories: about 4 MB), scanned by Hamming distance in a few
 * milliseconds, where Postgres spent tens of milliseconds on the same scan (a tuple's overhead dominates
 * a 256-bit XOR). Postgres stays the truth: the index only names candidates, which the store reads back
 * with their vectors under its visibility and liveness rules, so a forgotten, expired or changed memory
 * is never returned from here. New memories are appended by id (`since`); a periodic reload drops the
 * forgotten ones.
 */

const WORDS = SKETCH_BITS / 32;

/** A row of the index: its id, who may see it, its kind, its sketch (a '0'/'1' string of SKETCH_BITS). */
export interface SketchRow {
  id: string;
  scope: 'agent' | 'holt';
  role: string;
  kind: string;
  sketch: string;
}

const popcount = (x: number): number => {
  let v = x - ((x >>> 1) & 0x55555555);
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (((v + (v >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
};

/** A '0'/'1' string as SKETCH_BITS / 32 words. */
export function sketchWords(bits: string, out = new Uint32Array(WORDS), at = 0): Uint32Array {
  for (let w = 0; w < WORDS; w++) {
    let v = 0;
    for (let b = 0; b < 32; b++) v = (v << 1) | (bits.charCodeAt(w * 32 + b) === 49 ? 1 : 0);
    out[at + w] = v >>> 0;
  }
  return out;
}

export class SketchIndex {
  #ids: string[] = [];
  #words = new Uint32Array(WORDS * 1024);
  #roles: number[] = [];
  #holt: boolean[] = [];
  #kinds: number[] = [];
  /** Every id in it: a refresh reads a little behind the last id (ids are not committed in order). */
  readonly #present = new Set<string>();
  readonly #roleCodes = new Map<string, number>();
  readonly #kindCodes = new Map<string, number>();
  /** The highest id appended: the next refresh reads past it. */
  lastId = 0n;
  /** When it was last loaded whole (ms). */
  loadedAtMs = 0;

  get size(): number {
    return this.#ids.length;
  }

  static #code(m: Map<string, number>, k: string): number {
    let c = m.get(k);
    if (c === undefined) {
      c = m.size;
      m.set(k, c);
    }
    return c;
  }

  /** The ids it has above `from` (the newest, appended last): what a refresh need not read again. */
  idsAbove(from: bigint): string[] {
    const out: string[] = [];
    for (let i = this.#ids.length - 1; i >= 0; i--) {
      const id = this.#ids[i] as string;
      if (BigInt(id) <= from) break;
      out.push(id);
    }
    return out;
  }

  /** Appends the rows it does not have yet. */
  append(rows: readonly SketchRow[]): void {
    for (const r of rows) {
      const id = BigInt(r.id);
      if (this.#present.has(r.id) || r.sketch.length !== SKETCH_BITS) continue;
      this.#present.add(r.id);
      const n = this.#ids.length;
      if ((n + 1) * WORDS > this.#words.length) {
        const grown = new Uint32Array(this.#words.length * 2);
        grown.set(this.#words);
        this.#words = grown;
      }
      sketchWords(r.sketch, this.#words, n * WORDS);
      this.#ids.push(r.id);
      this.#roles.push(SketchIndex.#code(this.#roleCodes, r.role));
      this.#holt.push(r.scope === 'holt');
      this.#kinds.push(SketchIndex.#code(this.#kindCodes, r.kind));
      if (id > this.lastId) this.lastId = id;
    }
  }

  /**
   * The ids of the `limit` sketches nearest `query` (a '0'/'1' string) that `role` may see (its own, and
   * the Holt's; `ownOnly`: only those of `scope` and, for agent scope, of `role`), of `kinds` when given;
   * the nearest first, ties by the newer.
   */
  nearest(
    query: string,
    limit: number,
    o: { role: string; kinds?: readonly string[] | null; scope?: 'agent' | 'holt' },
  ): string[] {
    const q = sketchWords(query);
    const role = this.#roleCodes.get(o.role);
    const kinds = o.kinds?.length
      ? new Set(o.kinds.map((k) => this.#kindCodes.get(k)).filter((c) => c !== undefined))
      : undefined;
    // Distances are 0..SKETCH_BITS: a counting pass finds the cut-off, a second collects.
    const dist = new Uint16Array(this.#ids.length);
    const counts = new Uint32Array(SKETCH_BITS + 2);
    const NONE = SKETCH_BITS + 1;
    for (let i = 0; i < this.#ids.length; i++) {
      const holt = this.#holt[i] === true;
      const visible =
        o.scope === undefined
          ? holt || this.#roles[i] === role
          : o.scope === 'holt'
            ? holt
            : !holt && this.#roles[i] === role;
      if (!visible || (kinds && !kinds.has(this.#kinds[i] as number))) {
        dist[i] = NONE;
        continue;
      }
      let d = 0;
      const at = i * WORDS;
      for (let w = 0; w < WORDS; w++) d += popcount((this.#words[at + w] as number) ^ (q[w] as number));
      dist[i] = d;
      counts[d] = (counts[d] as number) + 1;
    }
    let cut = 0;
    let taken = 0;
    while (cut < SKETCH_BITS && taken + (counts[cut] as number) < limit) taken += counts[cut++] as number;
    const out: { i: number; d: number }[] = [];
    for (let i = this.#ids.length - 1; i >= 0; i--)
      if ((dist[i] as number) <= cut) out.push({ i, d: dist[i] as number });
    out.sort((a, b) => a.d - b.d || b.i - a.i);
    return out.slice(0, limit).map((x) => this.#ids[x.i] as string);
  }
}
