import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { silentLogger } from '../common/logger.ts';
import { createPool } from '../common/pg.ts';
import { seeded } from '../common/seeded.ts';
import { type IngressServer, startIngressServer } from '../ingress/server.ts';
import { createToken, tokenSource } from '../ingress/tokens.ts';
import { migrate } from '../state/migrate.ts';
import { LifeStore } from './store.ts';
import { LifeTasks } from './tasks.ts';

// Priorities through the real ingress into real Postgres, drained by the scheduler's own transaction
// (LifeStore.step) turn by turn: the order every turn is fed in, under a load of concurrent senders.

let postgres: PostgresServer;
let pool: pg.Pool;
let ingress: IngressServer;
let dir: string;
let urgent: string;
let plain: string;
const I = 'prio';
const ROLE = 'Triage';

beforeAll(async () => {
  postgres = await startPostgres();
  await migrate(postgres.url);
  pool = createPool(postgres.url, { max: 8 });
  dir = makeTempDir('priority');
  const file = join(dir, 'tokens.json');
  const rate = 100_000;
  urgent = createToken(file, {
    name: 'pager',
    role: ROLE,
    modes: ['enqueue_message'],
    origin: 'operator',
    ratePerMinute: rate,
    maxPriority: 9,
  }).token;
  plain = createToken(file, {
    name: 'ci',
    role: ROLE,
    modes: ['enqueue_message'],
    ratePerMinute: rate,
  }).token;
  ingress = await startIngressServer({
    instance: I,
    port: 0,
    host: '127.0.0.1',
    life: new LifeStore(pool),
    tasks: new LifeTasks(pool),
    tokens: tokenSource(file, () => undefined),
    knows: async (role) => role === ROLE,
    ring: () => undefined,
    log: silentLogger(),
    limits: { maxUndelivered: 10_000 },
  });
});
afterAll(async () => {
  await ingress?.close();
  await pool?.end();
  await postgres?.stop();
  removeDir(dir);
});

let key = 0;
const post = async (body: unknown, token = urgent) => {
  const r = await fetch(`http://127.0.0.1:${ingress.port}/v1/agents/${ROLE}/messages`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'idempotency-key': `k-${++key}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as { id?: string; error?: string } };
};

/** Turns until the queue is empty: each one's messages in the order it was fed them, with their priority. */
async function drain(life: LifeStore, turns = Number.POSITIVE_INFINITY) {
  const fed: { id: number; priority: number }[][] = [];
  while (fed.length < turns) {
    const step = await life.step(I, ROLE, 'pod-1', 60_000);
    if (step.decision.kind !== 'start') break;
    const ids = step.delivery?.messageIds ?? [];
    const rows = await pool.query<{ id: string; priority: number }>(
      'SELECT id, priority FROM holt.agent_messages WHERE id = ANY($1::bigint[])',
      [ids],
    );
    const byId = new Map(rows.rows.map((r) => [r.id, r.priority]));
    fed.push(ids.map((id) => ({ id: Number(id), priority: byId.get(id) ?? -1 })));
    await life.finish(step.fence!, { status: 'done' });
  }
  return fed;
}

/** Higher priority first; within one, the older (smaller id) first. */
const inOrder = (xs: { id: number; priority: number }[]) =>
  xs.every(
    (x, i) =>
      i === 0 ||
      xs[i - 1]!.priority > x.priority ||
      (xs[i - 1]!.priority === x.priority && xs[i - 1]!.id < x.id),
  );

describe('message priority', () => {
  it('a token gives at most its maxPriority; the priority is a label the model sees', async () => {
    expect((await post({ text: 'now', priority: 10 })).status).toBe(400);
    expect((await post({ text: 'now', priority: 1.5 })).status).toBe(400);
    const refused = await post({ text: 'now', priority: 1 }, plain);
    expect(refused).toMatchObject({
      status: 403,
      body: { error: expect.stringContaining('priority up to 0') },
    });
    const ok = await post({ text: 'the pager fired', priority: 7 });
    expect(ok.status).toBe(202);
    const [m] = await new LifeStore(pool).messages([ok.body.id!]);
    expect(m?.labels).toMatchObject({ origin: 'operator', priority: 7 });
    await drain(new LifeStore(pool));
  });

  it('under a load of concurrent senders, every turn is fed the highest priorities first, FIFO within one', async () => {
    const r = seeded(42);
    // 400 messages from 16 senders at once, of priorities 0-9 (a plain token's always 0).
    const sent: { priority: number }[] = Array.from({ length: 400 }, () => ({
      priority: Math.floor(r() * 10),
    }));
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < sent.length) {
          const i = next++;
          const p = sent[i]!.priority;
          const res = p
            ? await post({ text: `message ${i} of priority ${p}`, priority: p })
            : await post({ text: `message ${i}` }, plain);
          expect(res.status).toBe(202);
        }
      }),
    );
    // Each turn holds about 20 of them (HOLT_LIFE_TURN_BYTES); half the queue drains...
    const life = new LifeStore(pool, { turnBytes: 20 * 32 });
    const first = await drain(life, 10);
    // ...then a burst of the most urgent comes in: the very next turn is theirs.
    const burst = await Promise.all(
      Array.from({ length: 5 }, (_, i) => post({ text: `page ${i}`, priority: 9 })),
    );
    const rest = await drain(life);
    const all = [...first, ...rest];
    expect(all.flat()).toHaveLength(405);
    expect(new Set(all.flat().map((m) => m.id)).size).toBe(405);
    for (const turn of all) expect(inOrder(turn)).toBe(true);
    expect(inOrder(first.flat())).toBe(true);
    const burstIds = burst.map((b) => Number(b.body.id)).sort((a, b) => a - b);
    expect(rest[0]!.slice(0, 5).map((m) => m.id)).toEqual(burstIds);
    expect(inOrder(rest.flat().slice(5))).toBe(true);
    // And no lower priority was fed while a higher one waited: the order overall, bar the burst.
    expect(first.flat().at(-1)!.priority).toBeGreaterThanOrEqual(rest.flat()[5]!.priority);
  });
});
