import type pg from 'pg';
import { MEMORY_KEEP_USES } from '../state/retention.ts';
import { bodyKey, cosine, fuse, memoryAuthority, NEAR_DUPLICATE, recallQuery, sketchOf } from './rank.ts';
import { SketchIndex, type SketchRow } from './sketch-index.ts';
import {
  type Memory,
  type MemoryKind,
  MemoryQuery,
  MemoryRow,
  memoryOf,
  NewMemory,
  type Recalled,
} from './types.ts';

/**
 * Long-term memories in Postgres (migration 1767225601300_memories). A save folds a duplicate into the
 * memory it repeats (the same words, or a vector within NEAR_DUPLICATE of one) instead of adding it; a
 * recall fuses a full-text ranking with a vector ranking (reciprocal rank fusion), the vectors found by
 * their SimHash sketches and ordered by their exact cosine. Every row a caller gets is parsed.
 */

const COLUMNS = `id, instance, scope, role, kind, body, source_kind, source_id, labels, authority, merged,
  uses, embedding_model, created_at, expires_at`;

/**
 * A memory is live until it expires, and for good once recalled MEMORY_KEEP_USES times (retention keeps
 * it then: it proved useful).
 */
const LIVE = `(expires_at IS NULL OR expires_at > now() OR uses >= ${MEMORY_KEEP_USES})`;

/** This agent's memories and its Holt's, live ones only. */
const VISIBLE = `instance = $1 AND (scope = 'holt' OR role = $2) AND ${LIVE}`;

/** How many candidates each ranking brings to the fusion, per memory asked for. */
const CANDIDATES_PER_RESULT = 8;

export type SaveOutcome = 'saved' | 'exact_duplicate' | 'near_duplicate';

const parse = (rows: unknown[]): Memory[] => rows.map((r) => memoryOf(MemoryRow.parse(r)));

/** How long the lexemes' shares of the memories are kept before they are read again. */
const SHARES_TTL_MS = 60_000;

/**
 * The most matches a full-text ranking ranks: ranking costs a table read per match, so a query of words
 * thousands of memories share stops there (recallQuery already leaves out the commonest words).
 */
const TEXT_MATCHES = 1000;

/** How often the sketch index is loaded whole again (dropping what was forgotten or pruned). */
const SKETCH_RELOAD_MS = 10 * 60_000;
/** How far behind the last id a refresh reads (a save committed after a later one). */
const SKETCH_BEHIND = 200n;
const SKETCH_PAGE = 20_000;

export class MemoryStore {
  readonly pool: pg.Pool;
  #shares?: { at: number; map: Map<string, number> };
  readonly #indexes = new Map<string, { index: SketchIndex; refreshing: Promise<void> }>();
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** Saves a memory, or folds it into the one it repeats (its authority then the weaker of the two). */
  async save(input: NewMemory): Promise<{ memory: Memory; outcome: SaveOutcome }> {
    const m = NewMemory.parse(input);
    const authority = memoryAuthority(m.labels.authority);
    const expiresAt = m.ttlMs ? new Date(Date.now() + m.ttlMs) : null;
    const sketch = m.embedding ? sketchOf(m.embedding.vector) : null;
    if (m.embedding && sketch) {
      const near = await this.#nearest(m, m.embedding, sketch);
      if (near) {
        const folded = await this.#fold(near, authority, m.labels, expiresAt);
        if (folded) return { memory: folded, outcome: 'near_duplicate' };
      }
    }
    const r = await this.pool.query(
      `INSERT INTO holt.agent_memories AS m (instance, scope, role, kind, body, body_key, embedding,
         embedding_model, sketch, source_kind, source_id, labels, authority, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7::real[], $8, $9::bit(256), $10, $11, $12, $13, $14)
       ON CONFLICT (instance, scope, (CASE WHEN scope = 'agent' THEN role ELSE '' END), body_key)
       DO UPDATE SET ${FOLD_SET('EXCLUDED.authority', 'EXCLUDED.labels', 'EXCLUDED.expires_at')}
       RETURNING ${COLUMNS}, (xmax = 0) AS inserted`,
      [
        m.instance,
        m.scope,
        m.role,
        m.kind,
        m.body,
        bodyKey(m.body),
        m.embedding?.vector ?? null,
        m.embedding?.model ?? null,
        sketch,
        m.source.kind,
        m.source.id ?? null,
        JSON.stringify(m.labels),
        authority,
        expiresAt,
      ],
    );
    const row = r.rows[0] as { inserted: boolean };
    return { memory: parse([row])[0]!, outcome: row.inserted ? 'saved' : 'exact_duplicate' };
  }

  /**
   * The live memory of the same owner whose vector is nearest, if it is near enough to be the same (one
   * with the same words is the exact fold's, in the insert).
   */
  async #nearest(
    m: ReturnType<typeof NewMemory.parse>,
    e: { model: string; vector: number[] },
    sketch: string,
  ): Promise<string | undefined> {
    const index = await this.#sketchIndex(m.instance, e.model);
    const ids = index.nearest(sketch, 8, { role: m.role, scope: m.scope });
    if (!ids.length) return undefined;
    const r = await this.pool.query<{ id: string; embedding: number[] }>(
      `SELECT id, embedding FROM holt.agent_memories
       WHERE id = ANY($1::bigint[]) AND instance = $2 AND scope = $3 AND ($3 = 'holt' OR role = $4)
         AND embedding_model = $5 AND ${LIVE} AND body_key <> $6`,
      [ids, m.instance, m.scope, m.role, e.model, bodyKey(m.body)],
    );
    const best = r.rows
      .map((x) => ({ id: String(x.id), sim: cosine(e.vector, x.embedding) }))
      .sort((a, b) => b.sim - a.sim)[0];
    return best && best.sim >= NEAR_DUPLICATE ? best.id : undefined;
  }

  /**
   * The sketches of an instance's memories of one embedding model (sketch-index.ts), brought up to date
   * with what was saved since (one query, reading a little behind the last id: ids are not committed in
   * order), and loaded whole again every SKETCH_RELOAD_MS, which drops the forgotten and pruned.
   */
  async #sketchIndex(instance: string, model: string): Promise<SketchIndex> {
    const key = `${instance}\0${model}`;
    let e = this.#indexes.get(key);
    if (!e || Date.now() - e.index.loadedAtMs > SKETCH_RELOAD_MS) {
      const index = new SketchIndex();
      index.loadedAtMs = Date.now();
      e = { index, refreshing: Promise.resolve() };
      this.#indexes.set(key, e);
    }
    const entry = e;
    entry.refreshing = entry.refreshing.then(async () => {
      for (;;) {
        const from = entry.index.lastId - SKETCH_BEHIND;
        const r = await this.pool.query<SketchRow>(
          `SELECT id::text AS id, scope, role, kind, sketch::text AS sketch FROM holt.agent_memories
           WHERE instance = $1 AND embedding_model = $2 AND sketch IS NOT NULL AND id > $3
             AND id <> ALL($5::bigint[])
           ORDER BY id LIMIT $4`,
          [instance, model, (from < 0n ? 0n : from).toString(), SKETCH_PAGE, entry.index.idsAbove(from)],
        );
        entry.index.append(r.rows);
        if (r.rows.length < SKETCH_PAGE) return;
      }
    });
    await entry.refreshing;
    return entry.index;
  }

  async #fold(
    id: string,
    authority: string,
    labels: unknown,
    expiresAt: Date | null,
  ): Promise<Memory | undefined> {
    const r = await this.pool.query(
      `UPDATE holt.agent_memories m SET ${FOLD_SET('$2::text', '$3::jsonb', '$4::timestamptz')}
       WHERE id = $1 RETURNING ${COLUMNS}`,
      [id, authority, JSON.stringify(labels), expiresAt],
    );
    return parse(r.rows)[0];
  }

  /**
   * The `k` memories most relevant to a text, this agent's and its Holt's: a full-text ranking (any of
   * its words but the commonest, ts_rank: rank.ts recallQuery) and, given the query's vector, a vector ranking (nearest sketches, then the
   * exact cosine), fused. Recalled ones are counted (their `uses`) unless `touch` is false.
   */
  async search(input: MemoryQuery): Promise<Recalled[]> {
    const q = MemoryQuery.parse(input);
    const n = q.k * CANDIDATES_PER_RESULT;
    const kinds = q.kinds?.length ? q.kinds : null;
    const [text, vector] = await Promise.all([
      this.#textRanking(q.instance, q.role, q.text, kinds, n, q.k),
      q.embedding ? this.#vectorRanking(q.instance, q.role, q.embedding, kinds, n) : [],
    ]);
    const fused = fuse([text, vector.map((v) => v.id)]).slice(0, q.k);
    if (!fused.length) return [];
    const ids = fused.map((f) => f.id);
    const r = await this.pool.query(
      q.touch
        ? `UPDATE holt.agent_memories SET uses = uses + 1, last_used_at = now()
           WHERE id = ANY($1::bigint[]) RETURNING ${COLUMNS}`
        : `SELECT ${COLUMNS} FROM holt.agent_memories WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    const byId = new Map(parse(r.rows).map((m) => [m.id, m]));
    const sim = new Map(vector.map((v) => [v.id, v.sim]));
    return fused.flatMap((f): Recalled[] => {
      const m = byId.get(f.id);
      if (!m) return []; // forgotten between the rankings and now
      const t = text.indexOf(f.id);
      const v = vector.findIndex((x) => x.id === f.id);
      const s = sim.get(f.id);
      return [
        {
          ...m,
          score: f.score,
          ranks: { ...(t >= 0 ? { text: t + 1 } : {}), ...(v >= 0 ? { vector: v + 1 } : {}) },
          ...(s !== undefined ? { similarity: s } : {}),
        },
      ];
    });
  }

  async #textRanking(
    instance: string,
    role: string,
    text: string,
    kinds: MemoryKind[] | null,
    n: number,
    enough: number,
  ): Promise<string[]> {
    const [lexemes, shares] = await Promise.all([
      this.pool.query<{ l: string[] }>(`SELECT tsvector_to_array(to_tsvector('english', $1)) AS l`, [text]),
      this.#lexemeShares(),
    ]);
    const tiers = recallQuery(lexemes.rows[0]?.l ?? [], (l) => shares.get(l));
    const found: string[] = [];
    for (const query of tiers) {
      const r = await this.pool.query<{ id: string }>(
        `SELECT id FROM (
           SELECT id, tsv FROM holt.agent_memories
           WHERE ${VISIBLE} AND tsv @@ CAST($3 AS tsquery) AND ($4::text[] IS NULL OR kind = ANY($4))
           LIMIT $6) m, CAST($3 AS tsquery) q
         ORDER BY ts_rank(m.tsv, q) DESC, id DESC LIMIT $5`,
        [instance, role, query, kinds, n, TEXT_MATCHES],
      );
      for (const x of r.rows) if (!found.includes(String(x.id))) found.push(String(x.id));
      // A tier that found what is asked for is the best there is: the next are looser.
      if (found.length >= enough) break;
    }
    return found.slice(0, n);
  }

  /**
   * Each common lexeme's share of the memories, from the statistics ANALYZE keeps on `tsv` (its most
   * common elements; autovacuum refreshes them), read at most once a minute. Empty before the first
   * ANALYZE: every lexeme is rare then, as it is in a small table.
   */
  async #lexemeShares(): Promise<Map<string, number>> {
    if (this.#shares && Date.now() - this.#shares.at < SHARES_TTL_MS) return this.#shares.map;
    const r = await this.pool.query<{ elems: string[] | null; freqs: number[] | null }>(
      `SELECT most_common_elems::text::text[] AS elems, most_common_elem_freqs AS freqs FROM pg_stats
       WHERE schemaname = 'holt' AND tablename = 'agent_memories' AND attname = 'tsv'`,
    );
    const { elems, freqs } = r.rows[0] ?? { elems: null, freqs: null };
    const map = new Map((elems ?? []).map((e, i) => [e, Number(freqs?.[i] ?? 0)]));
    this.#shares = { at: Date.now(), map };
    return map;
  }

  async #vectorRanking(
    instance: string,
    role: string,
    e: { model: string; vector: number[] },
    kinds: MemoryKind[] | null,
    n: number,
  ): Promise<{ id: string; sim: number }[]> {
    // The sketches' order finds the neighbourhood (sketch-index.ts, in this process); the cosine orders
    // it. Only the nearest's vectors are read, under the visibility and liveness rules, in Postgres's
    // binary form (base64): parsing their text form cost five times more.
    const index = await this.#sketchIndex(instance, e.model);
    const ids = index.nearest(sketchOf(e.vector), n, { role, kinds });
    if (!ids.length) return [];
    const r = await this.pool.query<{ id: string; embedding: string | null }>(
      `SELECT id, encode(array_send(embedding), 'base64') AS embedding FROM holt.agent_memories
       WHERE id = ANY($3::bigint[]) AND ${VISIBLE} AND embedding_model = $4`,
      [instance, role, ids, e.model],
    );
    return r.rows
      .map((x) => ({ id: String(x.id), sim: x.embedding ? cosine(e.vector, floatsOf(x.embedding)) : 0 }))
      .filter((x) => x.sim > 0)
      .sort((a, b) => b.sim - a.sim)
      .slice(0, n);
  }

  /** The newest memories of an instance (of one agent, its own and the Holt's, when `role` is given). */
  async list(o: {
    instance: string;
    role?: string;
    kinds?: MemoryKind[];
    limit?: number;
  }): Promise<Memory[]> {
    const r = await this.pool.query(
      `SELECT ${COLUMNS} FROM holt.agent_memories
       WHERE instance = $1 AND ($2::text IS NULL OR scope = 'holt' OR role = $2)
         AND ($3::text[] IS NULL OR kind = ANY($3)) AND ${LIVE}
       ORDER BY created_at DESC, id DESC LIMIT $4`,
      [o.instance, o.role ?? null, o.kinds?.length ? o.kinds : null, Math.min(o.limit ?? 50, 1000)],
    );
    return parse(r.rows);
  }

  /** Forgets one memory, or every memory an agent wrote; how many went. */
  async forget(instance: string, what: { id: string } | { role: string }): Promise<number> {
    const r =
      'id' in what
        ? await this.pool.query('DELETE FROM holt.agent_memories WHERE instance = $1 AND id = $2::bigint', [
            instance,
            what.id,
          ])
        : await this.pool.query('DELETE FROM holt.agent_memories WHERE instance = $1 AND role = $2', [
            instance,
            what.role,
          ]);
    return r.rowCount ?? 0;
  }

  /** The live memories an agent wrote (its own and those it saved for the Holt), and their uses. */
  async ownCounts(instance: string, role: string): Promise<{ memories: number; recalls: number }> {
    const r = await this.pool.query<{ memories: string; recalls: string }>(
      `SELECT count(*) AS memories, coalesce(sum(uses), 0) AS recalls FROM holt.agent_memories
       WHERE instance = $1 AND role = $2 AND ${LIVE}`,
      [instance, role],
    );
    return { memories: Number(r.rows[0]?.memories ?? 0), recalls: Number(r.rows[0]?.recalls ?? 0) };
  }

  /** Each agent's live memories by kind. */
  async counts(instance: string): Promise<Record<string, Partial<Record<MemoryKind, number>>>> {
    const r = await this.pool.query<{ role: string; kind: MemoryKind; n: string }>(
      `SELECT role, kind, count(*) AS n FROM holt.agent_memories
       WHERE instance = $1 AND ${LIVE} GROUP BY role, kind`,
      [instance],
    );
    const out: Record<string, Partial<Record<MemoryKind, number>>> = {};
    for (const x of r.rows) out[x.role] = { ...out[x.role], [x.kind]: Number(x.n) };
    return out;
  }
}

/**
 * A `real[]` as `array_send` gives it, base64-encoded: a header (dimensions, null flag, element type, then
 * each dimension's length and lower bound), then each element's length (4) and its big-endian float4.
 * Anything but one dimension without nulls is no vector (empty: its cosine is 0).
 */
function floatsOf(base64: string): number[] {
  const b = Buffer.from(base64, 'base64');
  if (b.length < 20 || b.readInt32BE(0) !== 1 || b.readInt32BE(4) !== 0) return [];
  const n = b.readInt32BE(12);
  if (b.length !== 20 + 8 * n) return [];
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = b.readFloatBE(24 + 8 * i);
  return out;
}

/**
 * Folding a save into the memory it repeats: one more merge, the weaker authority (and the labels that
 * carry it), the later expiry (none if either keeps it for good).
 */
function FOLD_SET(authority: string, labels: string, expiresAt: string): string {
  const weaker = `(m.authority = 'external_evidence' OR ${authority} = 'external_evidence')`;
  return `merged = m.merged + 1, updated_at = now(),
    authority = CASE WHEN ${weaker} THEN 'external_evidence' ELSE 'agent_note' END,
    labels = CASE WHEN ${authority} = 'external_evidence' AND m.authority <> 'external_evidence'
      THEN ${labels} ELSE m.labels END,
    expires_at = CASE WHEN m.expires_at IS NULL OR ${expiresAt} IS NULL THEN NULL
      ELSE greatest(m.expires_at, ${expiresAt}) END`;
}
