import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../../test/harness/postgres.ts';
import { FenceLostError } from '../../common/errors.ts';
import { createPool } from '../../common/pg.ts';
import { migrate } from '../../state/migrate.ts';
import { MemoryStore } from './memory-store.ts';
import { INBOX_LIVE, TurnStore } from './turn-store.ts';

let pg: PostgresServer;
let store: TurnStore;
let memory: MemoryStore;
beforeAll(async () => {
  pg = await startPostgres();
  await migrate(pg.url);
  store = new TurnStore(createPool(pg.url, { max: 4 }));
  memory = new MemoryStore(store.pool);
});
afterAll(async () => {
  await store?.pool.end();
  await pg?.stop();
});

const I = 'llm-store';
const grant = (owner: string, claimId: string) =>
  ({ instance: I, claimId, role: 'writer', claimType: 'exclusive', owner, leaseMs: 60_000 }) as const;

describe('TurnStore', () => {
  it('update_memory is fenced: a stale turn cannot overwrite the working memory', async () => {
    const claimId = randomUUID();
    const a = await store.acquire(grant('pup-a', claimId));
    if (a.kind !== 'acquired') throw new Error(a.kind);
    await memory.setMemory(a.fence, 'writer', 'from a');
    // a's lease is given up and b takes the turn over (epoch + 1): a's fence is dead
    await store.release(a.fence, 'dispatched');
    const b = await store.acquire(grant('pup-b', claimId));
    if (b.kind !== 'acquired') throw new Error(b.kind);
    expect(b.fence.epoch).toBeGreaterThan(a.fence.epoch);
    await expect(memory.setMemory(a.fence, 'writer', 'stale write')).rejects.toThrow(FenceLostError);
    expect(await memory.memory(I, 'writer')).toBe('from a');
    await memory.setMemory(b.fence, 'writer', 'from b');
    expect(await memory.memory(I, 'writer')).toBe('from b');
  });

  it('the live-inbox-row check of acquire is an index lookup by turn id', async () => {
    const c = await store.pool.connect();
    try {
      await c.query('SET enable_seqscan = off');
      const plan = await c.query(`EXPLAIN ${INBOX_LIVE.replace('$1', `'${randomUUID()}'::uuid`)}`);
      expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/agent_inbox_turn/);
    } finally {
      await c.query('RESET enable_seqscan');
      c.release();
    }
  });
});
