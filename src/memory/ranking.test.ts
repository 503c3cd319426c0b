import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EmbeddingsServer, startEmbeddingsServer } from '../../test/harness/embeddings.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { createPool } from '../common/pg.ts';
import { agentLabels } from '../life/labels.ts';
import { migrate } from '../state/migrate.ts';
import { OpenAiEmbedder } from './embeddings.ts';
import { MEMORIES, QUERIES, type Ranker, recallAt } from './fixtures/recall.ts';
import { anyWordsQuery, recallQuery } from './rank.ts';
import { MemoryStore } from './store.ts';

// Recall on the labelled fixture (fixtures/recall.ts), real Postgres, vectors from the scripted
// embeddings endpoint: what the vectors add to the words.
let postgres: PostgresServer;
let pool: pg.Pool;
let store: MemoryStore;
let server: EmbeddingsServer;
let embedder: OpenAiEmbedder;
const I = 'recall';
const ROLE = 'Ops';
/** Saved memory id → its index in MEMORIES. */
const indexOf = new Map<string, number>();

beforeAll(async () => {
  [postgres, server] = await Promise.all([startPostgres(), startEmbeddingsServer()]);
  await migrate(postgres.url);
  pool = createPool(postgres.url, { max: 4 });
  store = new MemoryStore(pool);
  embedder = new OpenAiEmbedder({ baseUrl: server.url, model: 'scripted-embed', apiKey: 'sk-embed-test' });
  const vectors = await embedder.embed([...MEMORIES]);
  for (const [i, body] of MEMORIES.entries()) {
    const { memory, outcome } = await store.save({
      instance: I,
      role: ROLE,
      kind: 'observation',
      body,
      source: { kind: 'turn' },
      labels: agentLabels('memory_save'),
      embedding: { model: embedder.model, vector: vectors[i]! },
    });
    expect(outcome).toBe('saved'); // no two memories of the fixture fold into one
    indexOf.set(memory.id, i);
  }
});
afterAll(async () => {
  await pool?.end();
  await Promise.all([postgres?.stop(), server?.close()]);
});

const ranker =
  (hybrid: boolean): Ranker =>
  async (q, k) => {
    const [vector] = hybrid ? await embedder.embed([q.text]) : [];
    const found = await store.search({
      instance: I,
      role: ROLE,
      text: q.text,
      k,
      touch: false,
      ...(vector ? { embedding: { model: embedder.model, vector } } : {}),
    });
    return found.map((m) => indexOf.get(m.id) ?? -1);
  };

describe('recall on the labelled fixture', () => {
  it('the paraphrased queries share no word with their answers (as Postgres stems them)', async () => {
    const paraphrased = QUERIES.filter((q) => q.paraphrase);
    expect(paraphrased.length).toBeGreaterThanOrEqual(5);
    for (const q of paraphrased)
      for (const i of q.relevant) {
        const r = await pool.query<{ shared: boolean }>(
          `SELECT to_tsvector('english', $1) @@ to_tsquery('english', $2) AS shared`,
          [MEMORIES[i], anyWordsQuery(q.text)],
        );
        expect({ query: q.text, answer: i, shared: r.rows[0]?.shared }).toEqual({
          query: q.text,
          answer: i,
          shared: false,
        });
      }
    // The others do share words with theirs: full-text alone can find them.
    for (const q of QUERIES.filter((x) => !x.paraphrase))
      expect(await ranker(false)(q, 5), q.text).toEqual(expect.arrayContaining([q.relevant[0]]));
  });

  it('hybrid recall@5 beats full-text recall@5, and finds an answer to every paraphrased query', async () => {
    const text = await recallAt(5, ranker(false));
    const hybrid = await recallAt(5, ranker(true));
    expect(hybrid.mean).toBeGreaterThan(text.mean);
    for (const [n, q] of QUERIES.entries()) {
      if (q.paraphrase) {
        expect(text.perQuery[n], q.text).toBe(0); // words alone cannot find them
        expect(hybrid.perQuery[n], q.text).toBeGreaterThan(0);
      } else {
        // The vectors take nothing away from what the words found.
        expect(hybrid.perQuery[n], q.text).toBeGreaterThanOrEqual(text.perQuery[n]!);
      }
    }
  });

  it('a paraphrased answer is recalled by its vector, with its cosine', async () => {
    const q = QUERIES.find((x) => x.text === 'vehicle defect')!;
    const [vector] = await embedder.embed([q.text]);
    const found = await store.search({
      instance: I,
      role: ROLE,
      text: q.text,
      k: 5,
      touch: false,
      embedding: { model: embedder.model, vector: vector! },
    });
    // Its words are elsewhere ("vehicle telemetry", "defect"): it is found by its vector alone, first.
    const answer = found.find((m) => indexOf.get(m.id) === 9);
    expect(answer?.ranks).toEqual({ vector: 1 });
    expect(answer?.similarity).toBeGreaterThan(0.3);
  });
});

describe('the full-text queries of a recall (recallQuery)', () => {
  const shares = new Map([
    ['product', 0.4],
    ['deploy', 0.3],
    ['stage', 0.1],
  ]);
  const q = (...lexemes: string[]) => recallQuery(lexemes, (l) => shares.get(l));
  it('the rare lexemes together, then any of them; the common ones left out', () => {
    expect(q('product', 'billing', 'kafka')).toEqual(["'billing' & 'kafka'", "'billing' | 'kafka'"]);
    expect(q('product', 'billing')).toEqual(["'billing'"]);
  });
  it('only common ones: all together, the two rarest together, the rarest alone', () => {
    expect(q('product', 'deploy', 'stage')).toEqual([
      "'product' & 'deploy' & 'stage'",
      "'stage' & 'deploy'",
      "'stage'",
    ]);
    expect(q('product')).toEqual(["'product'"]);
    expect(q()).toEqual([]);
  });
  it('quotes what a lexeme holds, so no lexeme is an operator', () => {
    expect(q("o'brien", 'a\\b')).toEqual(["'o''brien' & 'a\\\\b'", "'o''brien' | 'a\\\\b'"]);
  });
});
