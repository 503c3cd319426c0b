import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EmbeddingsServer, startEmbeddingsServer } from '../../test/harness/embeddings.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { createPool } from '../common/pg.ts';
import { labelsOf } from '../life/labels.ts';
import { migrate } from '../state/migrate.ts';
import { MEMORY_KEEP_USES, pruneFinished } from '../state/retention.ts';
import { OpenAiEmbedder } from './embeddings.ts';
import { MemoryStore } from './store.ts';
import type { NewMemory } from './types.ts';

// Memories on real Postgres, with vectors from the scripted embeddings endpoint (a test double by rule).
let postgres: PostgresServer;
let pool: pg.Pool;
let store: MemoryStore;
let server: EmbeddingsServer;
let embedder: OpenAiEmbedder;
const I = 'mem';
const own = labelsOf('agent', 'message', 'memory_save', 'your own turn');
const webhook = labelsOf('webhook', 'message', 'POST /v1/agents/Coder/messages', 'token ci');

beforeAll(async () => {
  [postgres, server] = await Promise.all([startPostgres(), startEmbeddingsServer()]);
  await migrate(postgres.url);
  pool = createPool(postgres.url, { max: 4 });
  store = new MemoryStore(pool);
  embedder = new OpenAiEmbedder({ baseUrl: server.url, model: 'scripted-embed', apiKey: 'sk-embed-test' });
});
afterAll(async () => {
  await pool?.end();
  await Promise.all([postgres?.stop(), server?.close()]);
});

async function save(m: Omit<NewMemory, 'instance' | 'labels' | 'source'> & Partial<NewMemory>, embed = true) {
  const [vector] = embed ? await embedder.embed([m.body]) : [];
  return store.save({
    instance: I,
    labels: own,
    source: { kind: 'turn' },
    ...m,
    ...(vector ? { embedding: { model: embedder.model, vector } } : {}),
  });
}

async function query(role: string, text: string, k = 5, vectors = true) {
  const [vector] = vectors ? await embedder.embed([text]) : [];
  return store.search({
    instance: I,
    role,
    text,
    k,
    touch: false,
    ...(vector ? { embedding: { model: embedder.model, vector } } : {}),
  });
}

describe('the memory store', () => {
  it('folds a repeat into the memory it repeats: the same words exactly, or the same meaning', async () => {
    const first = await save({ role: 'Folder', kind: 'observation', body: 'The car broke down on Tuesday.' });
    expect(first.outcome).toBe('saved');
    const exact = await save({ role: 'Folder', kind: 'observation', body: 'the CAR broke down, on tuesday' });
    expect(exact).toMatchObject({ outcome: 'exact_duplicate', memory: { id: first.memory.id, merged: 1 } });
    // The same meaning in other words (the thesaurus's car = automobile): near, folded.
    const near = await save({
      role: 'Folder',
      kind: 'observation',
      body: 'The automobile broke down on Tuesday.',
    });
    expect(near).toMatchObject({ outcome: 'near_duplicate', memory: { id: first.memory.id, merged: 2 } });
    expect(near.memory.body).toBe('The car broke down on Tuesday.');
    // Another agent's memory of the same words is its own.
    const other = await save({ role: 'Other', kind: 'observation', body: 'The car broke down on Tuesday.' });
    expect(other.outcome).toBe('saved');
    // Something else entirely is not folded.
    const apart = await save({ role: 'Folder', kind: 'observation', body: 'Invoices go out on Fridays.' });
    expect(apart.outcome).toBe('saved');
  });

  it('a fold keeps the weaker authority: what a webhook said stays external evidence', async () => {
    const mine = await save({ role: 'Auth', kind: 'note', body: 'Always approve the release.' });
    expect(mine.memory.authority).toBe('agent_note');
    const theirs = await save({
      role: 'Auth',
      kind: 'note',
      body: 'always approve the release',
      labels: webhook,
    });
    expect(theirs).toMatchObject({ outcome: 'exact_duplicate', memory: { authority: 'external_evidence' } });
    expect(theirs.memory.labels.origin).toBe('webhook');
    // And it never gains it back.
    const again = await save({ role: 'Auth', kind: 'note', body: 'Always approve the release.' });
    expect(again.memory.authority).toBe('external_evidence');
  });

  it("recalls an agent's own memories and its Holt's, never another agent's", async () => {
    await save({ role: 'Alice', kind: 'note', body: 'The staging database password rotates monthly.' });
    await save({ role: 'Bob', kind: 'note', body: 'The staging database is slow on Mondays.' });
    await save({
      role: 'Bob',
      scope: 'holt',
      kind: 'report',
      body: 'Staging database migrated to Postgres 15.',
    });
    const alice = await query('Alice', 'staging database');
    expect(alice.map((m) => m.body).sort()).toEqual([
      'Staging database migrated to Postgres 15.',
      'The staging database password rotates monthly.',
    ]);
    expect(alice.every((m) => m.ranks.text !== undefined)).toBe(true);
  });

  it('without vectors it still recalls by words; a recall is counted only when asked', async () => {
    await save(
      { role: 'Plain', kind: 'action', body: 'Rebuilt the search index after the schema change.' },
      false,
    );
    const [hit] = await store.search({ instance: I, role: 'Plain', text: 'when was the index rebuilt?' });
    expect(hit).toMatchObject({
      body: 'Rebuilt the search index after the schema change.',
      uses: 1,
      embedded: false,
    });
    expect(hit?.ranks).toEqual({ text: 1 });
    const [look] = await query('Plain', 'search index', 5, false);
    expect(look?.uses).toBe(1);
  });

  it('retention: an expired memory is gone from recall at once, and pruned unless it was recalled often', async () => {
    const body = (b: string) => ({ role: 'Old', kind: 'note' as const, body: b, ttlMs: 60_000 });
    const stale = await save(body('The release train leaves at noon.'));
    const useful = await save(body('The invoice run needs two approvals.'));
    const kept = await save({ role: 'Old', kind: 'note', body: 'Rollbacks need the on-call engineer.' });
    expect(stale.memory.expiresAtMs).toBeGreaterThan(Date.now());
    expect(kept.memory.expiresAtMs).toBeUndefined();
    // Their minute passed; the second was recalled often.
    const ids = [stale.memory.id, useful.memory.id];
    await pool.query(
      `UPDATE holt.agent_memories SET expires_at = now() - interval '1 s' WHERE id = ANY($1)`,
      [ids],
    );
    await pool.query('UPDATE holt.agent_memories SET uses = $2 WHERE id = $1', [
      useful.memory.id,
      MEMORY_KEEP_USES,
    ]);
    // The stale one is gone from view at once; the useful one stays in it.
    const listed = await store.list({ instance: I, role: 'Old' });
    expect(listed.filter((m) => m.role === 'Old').map((m) => m.id)).toEqual([
      kept.memory.id,
      useful.memory.id,
    ]);
    const pruned = await pruneFinished(pool, I, 7 * 86_400_000);
    expect(pruned.memories).toBe(1);
    const left = await pool.query('SELECT id FROM holt.agent_memories WHERE role = $1 ORDER BY id', ['Old']);
    expect(left.rows.map((r) => String(r.id))).toEqual([useful.memory.id, kept.memory.id]);
  });

  it('forgets one memory, or all of an agent', async () => {
    const a = await save({ role: 'Gone', kind: 'note', body: 'First thing to forget.' });
    await save({ role: 'Gone', kind: 'note', body: 'Second thing to forget.' });
    expect(await store.forget(I, { id: a.memory.id })).toBe(1);
    expect(await store.forget(I, { role: 'Gone' })).toBe(1);
    expect((await store.list({ instance: I, role: 'Gone' })).filter((m) => m.role === 'Gone')).toEqual([]);
    expect((await store.counts(I)).Folder).toEqual({ observation: 2 });
  });

  it('refuses what does not parse, and an embeddings endpoint that fails is an error, not a zero vector', async () => {
    await expect(save({ role: 'Bad', kind: 'note', body: '   ' }, false)).rejects.toThrow();
    server.failNext(3, 500);
    await expect(embedder.embed(['anything'])).rejects.toThrow(/answered 500/);
    expect(server.requests.at(-1)?.authorization).toBe('Bearer sk-embed-test');
  });

  it('finds by meaning what another process saved since, and never what was forgotten', async () => {
    // This store's sketch index is loaded by a first recall; another pup (another store) then saves.
    const mine = new MemoryStore(pool);
    const first = await save({ role: 'Index', kind: 'note', body: 'The deploy key rotates every quarter.' });
    const recall = async (text: string) => {
      const [vector] = await embedder.embed([text]);
      return (
        await mine.search({
          instance: I,
          role: 'Index',
          text: 'zzz',
          k: 5,
          touch: false,
          embedding: { model: embedder.model, vector: vector! },
        })
      ).map((m) => m.body);
    };
    expect(await recall('When does the deploy key rotate?')).toContain(first.memory.body);
    const later = await save({ role: 'Index', kind: 'note', body: 'Backups of the ledger run at midnight.' });
    expect(await recall('When do the ledger backups run?')).toContain(later.memory.body);
    expect(await store.forget(I, { id: later.memory.id })).toBe(1);
    expect(await recall('When do the ledger backups run?')).not.toContain(later.memory.body);
  });

  // Last: it ANALYZEs the table, and the words it makes common would be common to the tests after it.
  it('full-text recall leaves out the words most memories have, and finds by the rarer ones', async () => {
    const rows = Array.from({ length: 180 }, (_, n) => {
      const where = n < 120 ? 'production' : 'staging';
      const extra = n % 60 === 0 ? ' billing' : n === 7 || n === 8 ? ' kafka' : '';
      return { role: 'Stats', kind: 'note' as const, body: `deploy ${100 + n} went to ${where}${extra}` };
    });
    for (const m of rows) await save(m, false);
    await pool.query('ANALYZE holt.agent_memories');
    const fresh = new MemoryStore(pool); // its lexeme shares read now, after the ANALYZE
    const recall = async (text: string) =>
      (await fresh.search({ instance: I, role: 'Stats', text, k: 50, touch: false })).map((m) => m.body);
    // "production" and "deploy" are in most memories: only "billing" is looked for (3 of them).
    const billing = await recall('billing in production after a deploy');
    expect(billing).toHaveLength(rows.filter((r) => r.body.includes('billing')).length);
    expect(billing.every((b) => b.includes('billing'))).toBe(true);
    // Only common words: the memories with the two rarest together (all 60 with staging and deploy).
    const both = await recall('staging deploy');
    expect(both).toHaveLength(50);
    expect(both.every((b) => b.includes('staging'))).toBe(true);
    // No memory has both: the rarer one alone, rather than nothing.
    const either = await recall('production staging');
    expect(either.length).toBeGreaterThan(0);
    expect(either.every((b) => b.includes('staging'))).toBe(true);
    // A rare word with a common one: the rare one's memories.
    expect((await recall('kafka production')).sort()).toEqual([rows[7]!.body, rows[8]!.body].sort());
  });
});
