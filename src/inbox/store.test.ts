import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { eventually } from '../../test/harness/wait.ts';
import { FenceLostError } from '../common/errors.ts';
import { actorIdOf, resultArtefactId, turnIdOf } from '../state/ids.ts';
import { migrate } from '../state/migrate.ts';
import { fenceOf } from '../state/schema.ts';
import { StepStore } from '../state/steps.ts';
import { acquireTargetLease, renewWhileRunning } from './leases.ts';
import { InboxMetrics } from './metrics.ts';
import { InboxStore } from './store.ts';
import { fakeClaim, ROLE } from './testkit.ts';
import { sweep } from './watchdog.ts';

let pg: PostgresServer;
let store: InboxStore;
const I = 'store-test';
const retry = { maxAttempts: 2, baseDelayMs: 0, maxDelayMs: 0 };
const grant = (target = 'pool') => ({
  instance: I,
  workerTarget: target,
  claimId: fakeClaim().id,
  role: ROLE,
  claimType: 'claim' as const,
  phase: 'exclusive' as const,
});

beforeAll(async () => {
  pg = await startPostgres();
  // Twice and concurrently: the migration lock makes racing callers safe, the second run is a no-op.
  const [a, b] = await Promise.all([migrate(pg.url), migrate(pg.url)]);
  expect(a.length === 0 || b.length === 0).toBe(true);
  expect([...a, ...b]).toContain('1767225600000_inbox');
  store = InboxStore.connect(pg.url);
});
afterAll(async () => {
  await store?.close();
  await pg?.stop();
});

describe('inbox store', () => {
  it('enqueue is idempotent per (claim, role, phase) and mints the turn on the head', async () => {
    const g = grant();
    const a = await store.enqueue(g);
    const b = await store.enqueue(g);
    expect(a.created).toBe(true);
    expect(b.created).toBe(false);
    expect(b.row.id).toBe(a.row.id);
    expect(a.row.actor_id).toBe(actorIdOf(I, g.claimId, ROLE));
    const head = await store.head(I, a.row.actor_id);
    expect(head).toMatchObject({
      status: 'dispatched',
      active_turn_id: turnIdOf(I, g.claimId, ROLE, 'exclusive'),
    });
  });

  it('a stale fence writes nothing: not the step, not the result, not the side effect', async () => {
    const { row } = await store.enqueue(grant('stale'));
    const [a] = await store.claim(I, ['stale'], 'worker-a', 1, 1);
    expect(a?.id).toBe(row.id);
    // worker-a stalls; its 1 ms lease expires and the watchdog takes the row back (epoch + 1).
    await new Promise((r) => setTimeout(r, 5));
    const s = await sweep(store, { instance: I, maxAttempts: 5, ring: () => undefined });
    expect(s.reclaimed.map((x) => x.id)).toContain(row.id);
    const [b] = await store.claim(I, ['stale'], 'worker-b', 1, 60_000);
    expect(b!.turn_epoch).toBeGreaterThan(a!.turn_epoch);
    const fa = fenceOf(a!);
    let sideEffects = 0;
    await expect(
      new StepStore(store.pool).recordStep(fa, {
        seq: 0,
        kind: 'llm',
        metadata: { llm_usage: { total_tokens: 1 } },
      }),
    ).rejects.toThrow(FenceLostError);
    await expect(
      new StepStore(store.pool).waitTool(fa, { toolCallId: 'c1', toolName: 'sh' }),
    ).rejects.toThrow(FenceLostError);
    await expect(store.complete(fa, { value: 'a' }, async () => void sideEffects++)).rejects.toThrow(
      FenceLostError,
    );
    await expect(store.complete(fa, { value: 'a' })).rejects.toThrow(FenceLostError);
    await expect(store.release(fa)).rejects.toThrow(FenceLostError);
    await expect(store.fail(fa, a!.attempts, 'x', true, retry)).rejects.toThrow(FenceLostError);
    await expect(store.park(fa, 'q')).rejects.toThrow(FenceLostError);
    expect(sideEffects).toBe(0);
    const fb = fenceOf(b!);
    await new StepStore(store.pool).recordStep(fb, {
      seq: 0,
      kind: 'llm',
      toolCallIds: ['c1'],
      metadata: { llm_response_cost: 0.01 },
    });
    const aid = resultArtefactId(b!.claim_id, ROLE, b!.turn_id);
    await store.complete(fb, { value: 'b', artefactId: aid }, async () => void sideEffects++);
    expect(sideEffects).toBe(1);
    expect(await store.turn(b!.turn_id)).toMatchObject({
      status: 'done',
      result: 'b',
      result_artefact_id: aid,
    });
    expect(await store.head(I, b!.actor_id)).toMatchObject({ status: 'idle', active_turn_id: null });
    // Completing twice is refused too: the fence is spent.
    await expect(store.complete(fb, { value: 'b2' })).rejects.toThrow(FenceLostError);
  });

  it("a claim and its renewals write the row alone; the actor's turns run one at a time, each under the head's epoch", async () => {
    // Two phases of one grant: one actor, two turns; the second waits for the first.
    const g = grant('turns');
    await store.enqueue(g);
    await store.enqueue({ ...g, phase: 'review', claimType: 'review' });
    const actor = actorIdOf(I, g.claimId, ROLE);
    const headVersion = async () =>
      (
        await store.pool.query<{ xmin: string; turn_epoch: string }>(
          'SELECT xmin::text, turn_epoch::text FROM holt.agent_state_head WHERE instance = $1 AND actor_id = $2',
          [I, actor],
        )
      ).rows[0];
    const before = await headVersion();
    const first = await store.claim(I, ['turns'], 'w', 5, 60_000);
    expect(first.map((r) => r.phase)).toEqual(['exclusive']);
    expect(first[0]?.turn_epoch).toBe(Number(before?.turn_epoch));
    expect(await store.renew('w', [fenceOf(first[0]!)], 60_000)).toEqual(new Set([first[0]!.id]));
    expect(await headVersion()).toEqual(before); // not a write to the head
    expect(await store.claim(I, ['turns'], 'w2', 5, 60_000)).toEqual([]);
    await store.complete(fenceOf(first[0]!), { value: 1 });
    // The first turn's end is a boundary: the second turn starts under the head, at its epoch.
    const second = await store.claim(I, ['turns'], 'w2', 5, 60_000);
    expect(second.map((r) => r.phase)).toEqual(['review']);
    expect(await store.head(I, actor)).toMatchObject({ active_turn_id: second[0]!.turn_id });
    // A reclaim moves the epoch on: the old fence is dead, the next claim holds the new one.
    await store.pool.query(
      `UPDATE holt.agent_inbox SET lease_expires_at = now() - interval '1 s' WHERE id = $1`,
      [second[0]!.id],
    );
    await sweep(store, { instance: I, maxAttempts: 5, ring: () => undefined });
    const again = await store.claim(I, ['turns'], 'w3', 5, 60_000);
    expect(again[0]?.turn_epoch).toBe(second[0]!.turn_epoch + 1);
    await expect(store.complete(fenceOf(second[0]!), { value: 'stale' })).rejects.toThrow(FenceLostError);
    await store.complete(fenceOf(again[0]!), { value: 'ok' });
  });

  it('a failing side effect rolls the completion back; the fence stays usable', async () => {
    await store.enqueue(grant('rollback'));
    const [r] = await store.claim(I, ['rollback'], 'w', 1, 60_000);
    const f = fenceOf(r!);
    await expect(
      store.complete(f, { value: 1 }, async () => Promise.reject(new Error('redis down'))),
    ).rejects.toThrow('redis down');
    expect((await store.row(r!.id))?.status).toBe('claimed');
    await store.complete(f, { value: 1 });
  });

  it('a worker reported dead loses at once the leases it held then, and only those; the report stays with the row', async () => {
    const { row } = await store.enqueue(grant('died'));
    const { row: later } = await store.enqueue(grant('died-later'));
    const [r] = await store.claim(I, ['died'], 'pod-a', 1, 600_000);
    expect(r?.id).toBe(row.id);
    const diedAt = Date.now() + 50;
    await new Promise((res) => setTimeout(res, 100));
    // The same pod name, restarted after the death, took another row: that lease is its own.
    const [taken] = await store.claim(I, ['died-later'], 'pod-a', 1, 600_000);
    expect(taken?.id).toBe(later.id);
    const report = {
      owner: 'pod-a',
      role: ROLE,
      exit_code: 137,
      signal: 'SIGKILL',
      logs: 'last words',
      at_ms: diedAt,
    };
    const other = { ...report, owner: 'pod-b' };
    let reads = 0;
    const exits = async () => (reads++ === 0 ? [report, other] : []);
    const s = await sweep(store, { instance: I, maxAttempts: 5, ring: () => undefined, exits });
    expect(s.exited).toBe(1);
    expect(s.reclaimed.map((x) => x.id)).toEqual([row.id]);
    const back = await store.row(row.id);
    expect(back).toMatchObject({ status: 'pending', last_error: 'worker exited with code 137' });
    expect(back?.worker_exit).toEqual(report);
    expect(await store.row(later.id)).toMatchObject({ status: 'claimed', lease_owner: 'pod-a' });
    // Its next lease lost to plain expiry: the old report no longer describes it.
    const [again] = await store.claim(I, ['died'], 'pod-c', 1, 1);
    expect(again?.id).toBe(row.id);
    await new Promise((res) => setTimeout(res, 5));
    await sweep(store, { instance: I, maxAttempts: 5, ring: () => undefined, exits });
    expect(await store.row(row.id)).toMatchObject({
      last_error: 'lease expired: worker lost',
      worker_exit: null,
    });
  });

  it('failures back off, then fail for good and are reported once', async () => {
    const { row } = await store.enqueue(grant('flaky'));
    const [r1] = await store.claim(I, ['flaky'], 'w', 1, 60_000);
    expect(await store.fail(fenceOf(r1!), r1!.attempts, 'boom', true, retry)).toBe('pending');
    const [r2] = await store.claim(I, ['flaky'], 'w', 1, 60_000);
    expect(r2!.attempts).toBe(2);
    expect(await store.fail(fenceOf(r2!), r2!.attempts, 'boom again', true, retry)).toBe('failed');
    expect(await store.claim(I, ['flaky'], 'w', 1, 60_000)).toEqual([]);
    const reported: string[] = [];
    const onFailed = async (x: { id: string }) => void reported.push(x.id);
    await sweep(store, { instance: I, maxAttempts: 2, ring: () => undefined, onFailed });
    await sweep(store, { instance: I, maxAttempts: 2, ring: () => undefined, onFailed });
    expect(reported.filter((id) => id === row.id)).toHaveLength(1);
    expect(await store.turn(row.turn_id)).toMatchObject({ status: 'failed', error: 'boom again' });
  });

  it('release gives the row back without counting the attempt', async () => {
    await store.enqueue(grant('drain'));
    const [r] = await store.claim(I, ['drain'], 'w', 1, 60_000);
    await store.release(fenceOf(r!));
    const [again] = await store.claim(I, ['drain'], 'w2', 1, 60_000);
    expect(again).toMatchObject({ id: r!.id, attempts: 1 });
  });

  it('queue depth counts pending, in flight and the oldest due row per target', async () => {
    for (let i = 0; i < 3; i++) await store.enqueue(grant('depth'));
    await store.claim(I, ['depth'], 'w', 1, 60_000);
    const d = (await store.queueDepth(I)).find((x) => x.worker_target === 'depth');
    expect(d).toMatchObject({ pending: 2, in_flight: 1 });
    expect(d!.oldest_pending_seconds).toBeGreaterThanOrEqual(0);
    const registry = new Registry();
    const m = new InboxMetrics(registry);
    m.observe(await store.queueDepth(I));
    m.observe([]); // the target emptied out: it reads 0, not its last value
    const text = await registry.metrics();
    expect(text).toContain('holt_inbox_depth{worker_target="depth",state="pending"} 0');
    expect(text).toContain('holt_inbox_oldest_pending_seconds{worker_target="depth"} 0');
  });

  it('a turn lease kept while running: a lost fence (FenceLostError) is lost, any other error is retried', async () => {
    const seen: string[] = [];
    let n = 0;
    const stop = renewWhileRunning(
      1,
      async () => {
        n++;
        if (n === 1) throw new Error('connection reset');
        if (n === 2) throw new FenceLostError();
      },
      () => seen.push('lost'),
      (e) => seen.push(`error: ${(e as Error).message}`),
    );
    try {
      await eventually('both renewals reported', () => seen.length >= 2);
      expect(seen.slice(0, 2)).toEqual(['error: connection reset', 'lost']);
    } finally {
      stop();
    }
  });

  it('svc1_ rows go only to the holder of the target lease', async () => {
    const t = 'svc1_store_test';
    await store.enqueue(grant(t));
    expect(await acquireTargetLease(store.pool, I, t, 'first', 60_000)).toBe(true);
    expect(await acquireTargetLease(store.pool, I, t, 'second', 60_000)).toBe(false);
    expect(await store.claim(I, [t], 'second', 5, 60_000)).toEqual([]);
    expect(await store.claim(I, [t], 'first', 5, 60_000)).toHaveLength(1);
  });

  it("a parked row is woken at its wait's deadline by one sweep and rung; one parked until later or without a deadline waits on", async () => {
    const inst = 'wake-due';
    const parked = async (target: string, wakeAtMs?: number) => {
      const g = { ...grant(target), instance: inst };
      await store.enqueue(g);
      const [r] = await store.claim(inst, [target], 'w', 1, 60_000);
      await store.park(fenceOf(r!), `q-${target}`, wakeAtMs);
      return { g, row: r! };
    };
    const past = await parked('due-past', Date.now() - 1_000);
    const later = await parked('due-later', Date.now() + 3_600_000);
    const never = await parked('due-never');
    // Waiting rows read back (a row without a deadline waits until 'infinity'), and a grant dispatched
    // again finds its parked row.
    expect(await store.row(never.row.id)).toMatchObject({ status: 'waiting', available_at: Infinity });
    expect((await store.enqueue(never.g)).row).toMatchObject({ id: never.row.id, status: 'waiting' });
    expect(await store.grantRows(inst, later.g.claimId, ROLE)).toEqual([
      expect.stringMatching(/^exclusive: waiting \(parked on q-due-later until /),
    ]);

    const rung: string[] = [];
    const s = await sweep(store, { instance: inst, maxAttempts: 5, ring: (t) => void rung.push(t) });
    expect(s.woken).toBe(1);
    expect(s.rung).toEqual({ 'due-past': 1 });
    expect(rung).toEqual(['due-past']);
    expect(await store.row(past.row.id)).toMatchObject({ status: 'pending', waiting_on: null });
    expect(await store.head(inst, past.row.actor_id)).toMatchObject({
      status: 'dispatched',
      active_turn_id: past.row.turn_id,
    });
    for (const x of [later, never])
      expect(await store.row(x.row.id)).toMatchObject({
        status: 'waiting',
        waiting_on: `q-${x.row.worker_target}`,
      });
    // The woken row runs again, under a new epoch (parking killed the old fence).
    const [again] = await store.claim(inst, ['due-past', 'due-later', 'due-never'], 'w2', 5, 60_000);
    expect(again).toMatchObject({ id: past.row.id, turn_epoch: past.row.turn_epoch + 1 });
    expect((await sweep(store, { instance: inst, maxAttempts: 5, ring: () => undefined })).woken).toBe(0);
  });

  it('rejects a worker target that is not one subject token', async () => {
    await expect(store.enqueue(grant('a.b'))).rejects.toThrow(/worker target/);
  });
});
