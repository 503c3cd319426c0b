/**
 * Long-term memory at scale (src/memory): one agent with 100 000 memories on plain Postgres (its own
 * server, migrated), vectors of 768 dimensions from the scripted embeddings (embedText, computed here,
 * not over HTTP).
 * - Write: the memories go in by a bulk INSERT … SELECT unnest (what save writes, without its
 *   near-duplicate scan, which makes save far too slow for a hundred thousand rows); then
 *   MemoryStore.save itself, SAVES times (2 000) from CONCURRENCY (4) callers on the full table:
 *   saves/s and a save's latency.
 * - Search: QUERIES (300) recalls through MemoryStore.search (k 5, touch false), one at a time, each
 *   full-text only and hybrid (with the query's vector): latency p50/p90/p99 of the call, and of each
 *   statement it ran (the text ranking, the vector ranking, the fetch of the result).
 * - Recall: recall@5 on the labelled fixture (src/memory/fixtures/recall.ts), full-text and hybrid, the
 *   fixture alone (its own agent) and amid the 100 000 (saved to the same agent).
 * Progress and a table of the figures on stderr, one JSON object on stdout. --explain: the plans of the
 * store's own ranking statements (EXPLAIN ANALYZE, TIMING OFF) on stderr.
 * Also: the cores the bench and everything else kept busy during the searches (the machine may be
 * shared). BENCH_MEMORY_STORE=<path of a store.ts>: measure that version of the store instead.
 * Run: node bench/memory/main.ts [--memories 100000] [--saves 2000] [--concurrency 4] [--queries 300]
 *   [--dim 768] [--explain]
 */
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { createPool } from '../../src/common/pg.ts';
import { agentLabels } from '../../src/life/labels.ts';
import { startPostgres } from '../../src/local/postgres.ts';
import { MEMORIES, QUERIES, type Ranker, recallAt } from '../../src/memory/fixtures/recall.ts';
import { anyWordsQuery, bodyKey, cosine, sketchOf } from '../../src/memory/rank.ts';
import type { MemoryStore as Store } from '../../src/memory/store.ts';
import { MEMORY_KINDS } from '../../src/memory/types.ts';
import { migrate } from '../../src/state/migrate.ts';
import { embedText } from '../../test/harness/embeddings.ts';
import { pct, round } from '../lib/proc.ts';
import { embedder, generator, memoryText, queryText } from './corpus.ts';
import { cpuWindow } from './cpu.ts';

const { values } = parseArgs({
  options: {
    memories: { type: 'string', default: '100000' },
    saves: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '4' },
    queries: { type: 'string', default: '300' },
    dim: { type: 'string', default: '768' },
    explain: { type: 'boolean', default: false },
  },
});
const N = Number(values.memories);
const SAVES = Number(values.saves);
const C = Number(values.concurrency);
const Q = Number(values.queries);
const DIM = Number(values.dim);
const I = 'bench';
const ROLE = 'Ops';
const MODEL = `scripted-embed-${DIM}`;
const BATCH = 1000;
const LABELS = agentLabels('memory_save');

const t0 = performance.now();
const log = (s: string) =>
  process.stderr.write(`[bench/memory ${((performance.now() - t0) / 1000).toFixed(1)}s] ${s}\n`);
const vec = embedder(DIM);
const stats = (xs: number[]) => ({ p50: pct(xs, 50), p90: pct(xs, 90), p99: pct(xs, 99), max: pct(xs, 100) });
const load = () => loadavg().map((x) => round(x, 2));

// The cached vectors are embedText's.
for (const n of [0, 1, 2, 3]) {
  const text = memoryText(n, generator(n));
  if (cosine(vec(text), embedText(text, DIM)) < 0.999999) throw new Error(`vector of "${text}" differs`);
}

/** Each statement the store runs, with its time, while `recording` is set: where a search's time goes. */
type Statement = 'text_ranking' | 'lexemes' | 'sketch_refresh' | 'vector_candidates' | 'fetch' | 'other';
const statementOf = (sql: string): Statement =>
  sql.includes('tsquery')
    ? 'text_ranking'
    : sql.includes('tsvector_to_array')
      ? 'lexemes'
      : sql.includes('sketch::text')
        ? 'sketch_refresh'
        : sql.includes('array_send')
          ? 'vector_candidates'
          : sql.includes('id = ANY')
            ? 'fetch'
            : 'other';
let recording: Map<Statement, number[]> | undefined;
const seen: { sql: string; params: unknown[] }[] = [];
const spied = (pool: pg.Pool): pg.Pool =>
  new Proxy(pool, {
    get(target, p, receiver) {
      if (p !== 'query') return Reflect.get(target, p, receiver);
      return async (sql: string, params: unknown[]) => {
        const t = performance.now();
        const r = await target.query(sql, params);
        if (recording) {
          const kind = statementOf(sql);
          recording.set(kind, [...(recording.get(kind) ?? []), performance.now() - t]);
          seen.push({ sql, params });
        }
        return r;
      };
    },
  });

// The store under test: src/memory's, or another version of it (BENCH_MEMORY_STORE, a path) to compare.
const { MemoryStore }: { MemoryStore: typeof Store } = await import(
  process.env.BENCH_MEMORY_STORE ?? '../../src/memory/store.ts'
);

const load0 = load();
const pgs = await startPostgres('holt_bench_memory');
const pool = createPool(pgs.url, { max: 2 * C });
try {
  await migrate(pgs.url);
  const store = new MemoryStore(spied(pool));

  // 1. The hundred thousand, in batches (the next batch's vectors computed while one is written).
  log(`writing ${N} memories of ${DIM} dimensions for ${ROLE}, ${BATCH} a statement`);
  const r = generator(1);
  const batch = (from: number) => {
    const rows = {
      kind: [] as string[],
      body: [] as string[],
      key: [] as string[],
      e: [] as string[],
      s: [] as string[],
    };
    for (let n = from; n < Math.min(N, from + BATCH); n++) {
      const body = memoryText(n, r);
      const v = vec(body);
      rows.kind.push(MEMORY_KINDS[n % MEMORY_KINDS.length]!);
      rows.body.push(body);
      rows.key.push(bodyKey(body));
      rows.e.push(`{${v.join(',')}}`);
      rows.s.push(sketchOf(v));
    }
    return rows;
  };
  const insert = (b: ReturnType<typeof batch>) =>
    pool.query(
      `INSERT INTO holt.agent_memories (instance, scope, role, kind, body, body_key, embedding,
         embedding_model, sketch, source_kind, labels, authority)
       SELECT $1, 'agent', $2, k, b, bk, e::real[], $3, s::bit(256), 'turn', $4::jsonb, 'agent_note'
       FROM unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[]) AS t(k, b, bk, e, s)
       ON CONFLICT DO NOTHING`,
      [I, ROLE, MODEL, JSON.stringify(LABELS), b.kind, b.body, b.key, b.e, b.s],
    );
  const w0 = performance.now();
  let inserted = 0;
  let writing: Promise<{ rowCount: number | null }> | undefined;
  for (let from = 0; from < N; from += BATCH) {
    const b = batch(from);
    inserted += (await writing)?.rowCount ?? 0;
    writing = insert(b);
    if ((from / BATCH) % 10 === 9) log(`  ${from + BATCH} computed`);
  }
  inserted += (await writing)?.rowCount ?? 0;
  const bulkS = (performance.now() - w0) / 1000;
  log(`bulk: ${inserted} rows in ${bulkS.toFixed(1)} s; VACUUM ANALYZE`);
  await pool.query('VACUUM ANALYZE holt.agent_memories');
  // None of them shares a word with a fixture query: the fixture's answers stay its only right ones.
  for (const q of QUERIES) {
    const r = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM holt.agent_memories WHERE role = $1 AND tsv @@ to_tsquery('english', $2)`,
      [ROLE, anyWordsQuery(q.text)],
    );
    if (Number(r.rows[0]?.n))
      throw new Error(`${r.rows[0]?.n} synthetic memories share words with "${q.text}"`);
  }

  // 2. MemoryStore.save on the full table: C callers, SAVES saves.
  log(`MemoryStore.save: ${SAVES} saves from ${C} callers`);
  const rs = generator(2);
  const outcomes: Record<string, number> = {};
  const saveMs: number[] = [];
  let next = 0;
  const s0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < SAVES) {
        const n = next++;
        const body = memoryText(N + n, rs);
        const t = performance.now();
        const { outcome } = await store.save({
          instance: I,
          role: ROLE,
          kind: 'observation',
          body,
          source: { kind: 'turn' },
          labels: LABELS,
          embedding: { model: MODEL, vector: vec(body) },
        });
        saveMs.push(performance.now() - t);
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        if (n % 500 === 499) log(`  ${n + 1} saved`);
      }
    }),
  );
  const saveS = (performance.now() - s0) / 1000;
  await pool.query('VACUUM ANALYZE holt.agent_memories');

  // 3. The fixture, alone (its own agent) and amid the hundred thousand (the same agent).
  log('recall on the fixture');
  const fixtureIds = new Map<string, Map<string, number>>();
  for (const role of ['Fixture', ROLE]) {
    const ids = new Map<string, number>();
    for (const [i, body] of MEMORIES.entries()) {
      const { memory, outcome } = await store.save({
        instance: I,
        role,
        kind: 'observation',
        body,
        source: { kind: 'turn' },
        labels: LABELS,
        embedding: { model: MODEL, vector: vec(body) },
      });
      if (outcome !== 'saved') log(`  fixture memory ${i} was folded (${outcome}) for ${role}`);
      ids.set(memory.id, i);
    }
    fixtureIds.set(role, ids);
  }
  const ranker =
    (role: string, hybrid: boolean): Ranker =>
    async (q, k) =>
      (
        await store.search({
          instance: I,
          role,
          text: q.text,
          k,
          touch: false,
          ...(hybrid ? { embedding: { model: MODEL, vector: vec(q.text) } } : {}),
        })
      ).map((m) => fixtureIds.get(role)?.get(m.id) ?? -1);
  const recall = async (role: string) => ({
    full_text: round((await recallAt(5, ranker(role, false))).mean, 3),
    hybrid: round((await recallAt(5, ranker(role, true))).mean, 3),
  });
  const recallAlone = await recall('Fixture');
  const recallAmid = await recall(ROLE);

  // 4. Search latency, one recall at a time, after a warm-up; one in ten is a fixture query.
  const rq = generator(3);
  const queries = Array.from({ length: Q }, (_, i) => {
    const text = i % 10 === 0 ? QUERIES[(i / 10) % QUERIES.length]!.text : queryText(rq);
    return { text, vector: vec(text) };
  });
  const search = (q: (typeof queries)[number], hybrid: boolean) =>
    store.search({
      instance: I,
      role: ROLE,
      text: q.text,
      k: 5,
      touch: false,
      ...(hybrid ? { embedding: { model: MODEL, vector: q.vector } } : {}),
    });
  log(`search: ${Q} queries, full-text and hybrid`);
  for (const q of queries.slice(0, 30)) await Promise.all([search(q, false), search(q, true)]);
  const textMs: number[] = [];
  const textByQuery: { text: string; ms: number }[] = [];
  const hybridMs: number[] = [];
  const statements = new Map<Statement, number[]>();
  const loadSearch0 = load();
  const cpu = cpuWindow([process.pid, pgs.proc.child.pid ?? -1]);
  for (const [i, q] of queries.entries()) {
    // Alternating which goes first, so neither always finds the other's pages warm.
    for (const hybrid of i % 2 ? [true, false] : [false, true]) {
      recording = hybrid ? statements : undefined;
      const t = performance.now();
      await search(q, hybrid);
      (hybrid ? hybridMs : textMs).push(performance.now() - t);
      if (!hybrid) textByQuery.push({ text: q.text, ms: performance.now() - t });
      recording = undefined;
    }
  }
  const loadSearch1 = load();
  const searchCpu = cpu();

  const size = await pool.query<{ heap: string; toast: string; total: string; rows: string }>(
    `SELECT pg_relation_size(c.oid) AS heap, pg_relation_size(c.reltoastrelid) AS toast,
       pg_total_relation_size(c.oid) AS total, (SELECT count(*) FROM holt.agent_memories) AS rows
     FROM pg_class c WHERE c.oid = 'holt.agent_memories'::regclass`,
  );
  const mb = (x: string | undefined) => round(Number(x) / 2 ** 20, 1);
  const z = size.rows[0];

  if (values.explain) {
    await explain(pool);
    const slow = textByQuery.sort((a, b) => b.ms - a.ms).slice(0, 5);
    process.stderr.write(
      `\n-- slowest full-text searches\n${slow.map((x) => `${x.ms.toFixed(1)} ms  ${x.text}`).join('\n')}\n`,
    );
  }

  const out = {
    memories: N,
    dim: DIM,
    table: { rows: Number(z?.rows), heap_mb: mb(z?.heap), toast_mb: mb(z?.toast), total_mb: mb(z?.total) },
    bulk_insert: { rows: inserted, seconds: round(bulkS, 1), rows_per_s: Math.round(inserted / bulkS) },
    save: {
      saves: SAVES,
      callers: C,
      per_s: round(SAVES / saveS, 1),
      latency_ms: stats(saveMs),
      outcomes,
    },
    search_ms: {
      queries: Q,
      k: 5,
      full_text: stats(textMs),
      hybrid: stats(hybridMs),
      hybrid_statements: Object.fromEntries([...statements].map(([k, xs]) => [k, stats(xs)])),
    },
    targets_p99_ms: { full_text: 20, hybrid: 50 },
    recall_at_5: { fixture_alone: recallAlone, fixture_amid: recallAmid },
    load_average: { start: load0, search_start: loadSearch0, search_end: loadSearch1 },
    /** Cores busy during the searches: the bench's own (node, Postgres) and everything else's. */
    search_cpu: searchCpu,
  };
  const st = out.search_ms.hybrid_statements as Record<string, { p50: number; p99: number }>;
  const rows: [string, string, string][] = [
    ['bulk insert (unnest, 1 000 a statement)', `${out.bulk_insert.rows_per_s} rows/s`, ''],
    [
      `MemoryStore.save, ${C} callers, on ${N.toLocaleString('en')}`,
      `${out.save.per_s}/s; p50 ${out.save.latency_ms.p50} ms, p99 ${out.save.latency_ms.p99} ms`,
      '',
    ],
    [
      'search full-text p50 / p99',
      `${out.search_ms.full_text.p50} / ${out.search_ms.full_text.p99} ms`,
      '≤ 20 ms',
    ],
    ['search hybrid p50 / p99', `${out.search_ms.hybrid.p50} / ${out.search_ms.hybrid.p99} ms`, '≤ 50 ms'],
    ...(['lexemes', 'text_ranking', 'sketch_refresh', 'vector_candidates', 'fetch'] as const).map(
      (k): [string, string, string] => [
        `  hybrid's ${k.replace('_', ' ')} p50 / p99`,
        `${st[k]?.p50} / ${st[k]?.p99} ms`,
        '',
      ],
    ),
    ['recall@5, fixture alone: full-text / hybrid', `${recallAlone.full_text} / ${recallAlone.hybrid}`, ''],
    [
      `recall@5, fixture amid ${N.toLocaleString('en')}: full-text / hybrid`,
      `${recallAmid.full_text} / ${recallAmid.hybrid}`,
      '',
    ],
    [
      'cores busy during the searches: bench / others',
      `${searchCpu.bench_cores} / ${searchCpu.other_cores} of ${availableParallelism()}`,
      '',
    ],
  ];
  const head = ['figure', 'value', 'target p99'];
  const w = [0, 1, 2].map((c) => Math.max(...[head, ...rows].map((x) => x[c]!.length)));
  const line = (x: string[]) => `| ${x.map((s, c) => s.padEnd(w[c]!)).join(' | ')} |`;
  process.stderr.write(
    `\n${line(head)}\n${line(w.map((n) => '-'.repeat(n)))}\n${rows.map(line).join('\n')}\n\n`,
  );
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
} finally {
  await pool.end();
  await pgs.stop();
}

/**
 * The plans of the store's own ranking statements, as it ran them during the searches (the last text
 * ranking and vector ranking seen, a hybrid search's), with the time each took, per-node timing off.
 */
async function explain(pool: pg.Pool): Promise<void> {
  for (const kind of ['text_ranking', 'vector_candidates'] as const) {
    const last = seen.findLast((s) => statementOf(s.sql) === kind);
    if (!last) continue;
    const plan = await pool.query(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${last.sql}`, last.params);
    const text = plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
    process.stderr.write(`\n-- ${kind}\n${text}\n`);
  }
}
