import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { FenceLostError } from '../common/errors.ts';
import { createPool } from '../common/pg.ts';
import { TurnStore } from '../llm/stores/turn-store.ts';
import { migrate } from '../state/migrate.ts';
import type { Fence } from '../state/schema.ts';
import { WorkStore } from './store.ts';

let pg: PostgresServer;
let turns: TurnStore;
let work: WorkStore;
beforeAll(async () => {
  pg = await startPostgres();
  await migrate(pg.url);
  turns = new TurnStore(createPool(pg.url, { max: 4 }));
  work = new WorkStore(turns.pool);
});
afterAll(async () => {
  await turns?.pool.end();
  await pg?.stop();
});

const I = 'work-store';
/** A turn's fence: the lease a standard LLM pup takes on its actor's head. */
async function fence(owner: string, claimId = randomUUID()): Promise<Fence> {
  const a = await turns.acquire({
    instance: I,
    claimId,
    role: 'Dev',
    claimType: 'exclusive',
    owner,
    leaseMs: 60_000,
  });
  if (a.kind !== 'acquired') throw new Error(a.kind);
  return a.fence;
}

describe('WorkStore', () => {
  it('create, update (todos replaced whole), pick and complete: the current item follows, the report is kept', async () => {
    const f = await fence('pup-a');
    const one = await work.create(f, 'Dev', 'fix the login crash');
    if (!one.ok) throw new Error('create');
    expect(one.value).toMatchObject({ state: 'open', planStatus: 'draft', todos: [], blockedBy: [] });
    expect((await work.current(I, 'Dev'))?.id).toBe(one.value.id); // the first item becomes current
    const two = await work.create(f, 'Dev', 'write the release note');
    if (!two.ok) throw new Error('create');
    expect((await work.current(I, 'Dev'))?.id).toBe(one.value.id);
    const up = await work.update(f, 'Dev', one.value.id, {
      planStatus: 'ready',
      todos: [{ text: 'reproduce' }, { text: 'patch', done: false }],
      recheckAtMs: Date.now() + 60_000,
    });
    expect(up).toMatchObject({
      ok: true,
      value: { planStatus: 'ready', todos: [{ text: 'reproduce', done: false }, { text: 'patch' }] },
    });
    const again = await work.update(f, 'Dev', one.value.id, { todos: [{ text: 'patch', done: true }] });
    expect(again.ok && again.value.todos).toEqual([{ text: 'patch', done: true }]);
    expect(await work.pick(f, 'Dev', two.value.id)).toMatchObject({ ok: true });
    expect((await work.current(I, 'Dev'))?.id).toBe(two.value.id);
    expect(await work.complete(f, 'Dev', two.value.id, ' ')).toEqual({
      ok: false,
      error: 'completing a work item needs a completion report: what was done and concluded',
    });
    const done = await work.complete(f, 'Dev', two.value.id, 'Release note written and linked from the PR.');
    expect(done).toMatchObject({
      ok: true,
      value: { state: 'completed', report: 'Release note written and linked from the PR.' },
    });
    expect(await work.current(I, 'Dev')).toBeUndefined(); // the current item was the completed one
    expect(await work.update(f, 'Dev', two.value.id, { objective: 'x' })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/no open work item/),
    });
    expect((await work.list(I, 'Dev')).map((i) => i.id)).toEqual([one.value.id]);
    expect((await work.list(I, 'Dev', { all: true })).map((i) => i.objective).sort()).toEqual([
      'fix the login crash',
      'write the release note',
    ]);
  });

  it('holt work reads every role of an instance, and finds an item by a unique id prefix', async () => {
    const f = await fence('pup-c');
    const made = await work.create(f, 'Dev', 'a third objective');
    if (!made.ok) throw new Error('create');
    const all = await work.listAll(I, { all: true });
    expect(all.map((i) => i.objective)).toContain('a third objective');
    expect(all.every((i) => i.instance === I)).toBe(true);
    expect((await work.find(I, made.value.id.slice(0, 13)))?.id).toBe(made.value.id);
    expect(await work.find(I, '')).toBeUndefined(); // matches several: not one
    expect(await work.find('another-instance', made.value.id)).toBeUndefined();
  });

  it('a stale turn writes nothing: its fence was taken over', async () => {
    const claimId = randomUUID();
    const stale = await fence('pup-a', claimId);
    await turns.pool.query(
      'UPDATE holt.agent_state_head SET turn_epoch = turn_epoch + 1 WHERE instance = $1 AND actor_id = $2',
      [I, stale.actorId],
    );
    await expect(work.create(stale, 'Dev', 'from a dead turn')).rejects.toThrow(FenceLostError);
    expect((await work.list(I, 'Dev', { all: true })).some((i) => i.objective === 'from a dead turn')).toBe(
      false,
    );
  });
});
