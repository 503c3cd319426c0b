import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import type { Claim } from '../blackboard/types.ts';
import { connectBus } from '../bus/connect.ts';
import type { RingFn } from '../bus/doorbell.ts';
import { Doorbell, ringer } from '../bus/doorbell.ts';
import { doorbellSubject } from '../bus/subjects.ts';
import { silentLogger } from '../common/logger.ts';
import { startOrchestratorInbox } from '../orchestrator/inbox.ts';
import { InboxDispatcher } from '../orchestrator/inbox-dispatcher.ts';
import { migrate } from '../state/migrate.ts';
import type { InboxRow } from '../state/schema.ts';
import { InboxStore } from './store.ts';
import { fakeClaim, ROLE, writeResult } from './testkit.ts';
import { sweep, Watchdog } from './watchdog.ts';
import { InboxWorker } from './worker.ts';

const I = 'worker-test';
let pg: PostgresServer;
let nats: NatsServer;
let redis: RedisServer;
let store: InboxStore;
let nc: NatsConnection;
let bb: Blackboard;

beforeAll(async () => {
  [pg, nats, redis] = await Promise.all([startPostgres(), startNats(), startRedis()]);
  await migrate(pg.url);
  store = InboxStore.connect(pg.url, { max: 30 });
  nc = await connectBus(nats.url, 'worker-test');
  bb = Blackboard.connect(redis.url, I);
});
afterAll(async () => {
  await bb?.close();
  await nc?.drain();
  await store?.close();
  await Promise.all([pg?.stop(), nats?.stop(), redis?.stop()]);
});

const claimOf = (): Claim => ({
  ...fakeClaim(),
  status: 'pending_exclusive',
  granted_review_agents: [],
  granted_parallel_agents: [],
  granted_exclusive_agent: ROLE,
});

/** A pool of in-process workers that count executions per claim and write the result artefact. */
function pool(target: string, n: number, opts: { concurrency?: number; hold?: () => Promise<void> } = {}) {
  const runs = new Map<string, number>();
  const byWorker = new Map<number, number>();
  const workers = Array.from({ length: n }, (_, i) => {
    return new InboxWorker({
      store,
      nc,
      instance: I,
      targets: [target],
      concurrency: opts.concurrency ?? 4,
      leaseMs: 10_000,
      graceMs: 200,
      log: silentLogger(),
      execute: async (row: InboxRow, _f, signal) => {
        runs.set(row.claim_id, (runs.get(row.claim_id) ?? 0) + 1);
        byWorker.set(i, (byWorker.get(i) ?? 0) + 1);
        if (opts.hold)
          await Promise.race([
            opts.hold(),
            new Promise((_, rej) => signal.addEventListener('abort', () => rej(signal.reason))),
          ]);
        return { worker: i };
      },
      publish: async (row) => void (await writeResult(bb, row, `w${i}`)),
    });
  });
  return {
    workers,
    runs,
    byWorker,
    start: () => Promise.all(workers.map((w) => w.start())),
    stop: () => Promise.all(workers.map((w) => w.stop())),
  };
}

/** The orchestrator's side: grants to `target` become inbox rows (and doorbells, given `ring`). */
const dispatcherTo = (target: string, ring: RingFn = () => undefined) =>
  new InboxDispatcher({ store, instance: I, targetOf: () => target, ring });
const grant = (d: InboxDispatcher, claim: Claim) =>
  d.dispatch({ claim, role: ROLE, claimType: 'claim', phase: 'parallel' });

const doneCount = async (target: string) =>
  Number(
    (
      await store.pool.query(
        `SELECT count(*) AS n FROM holt.agent_inbox WHERE instance = $1 AND worker_target = $2 AND status = 'done'`,
        [I, target],
      )
    ).rows[0].n,
  );

describe('inbox workers', () => {
  it('1 000 claims over 8 workers: each executed exactly once, one result artefact each', async () => {
    const target = 'bulk';
    const p = pool(target, 8);
    await p.start();
    const d = dispatcherTo(target, ringer(nc, I));
    const claims = Array.from({ length: 1000 }, claimOf);
    for (let i = 0; i < claims.length; i += 50)
      await Promise.all(
        claims
          .slice(i, i + 50)
          .map((claim) => d.dispatch({ claim, role: ROLE, claimType: 'exclusive', phase: 'exclusive' })),
      );
    // A re-dispatch (restart recovery) of the same grants must not make more work.
    await Promise.all(
      claims
        .slice(0, 20)
        .map((claim) =>
          d.dispatch({ claim, role: ROLE, claimType: 'exclusive', phase: 'exclusive', reason: 'recovery' }),
        ),
    );
    const dog = new Watchdog(store, { instance: I, maxAttempts: 3, ring: ringer(nc, I), intervalMs: 500 });
    dog.start(); // as in production; a doorbell lost to a busy worker is re-rung
    await eventually('1000 claims done', async () => (await doneCount(target)) === 1000, {
      timeoutMs: 120_000,
    });
    await dog.stop();
    await p.stop();
    expect(p.runs.size).toBe(1000);
    expect([...p.runs.values()].every((n) => n === 1)).toBe(true);
    expect([...p.byWorker.keys()].length).toBeGreaterThan(1);
    const results = (await bb.listArtefactIds()).length;
    expect(results).toBe(1000);
  });

  it('doorbells dropped on purpose: the watchdog re-rings and all work completes', async () => {
    const target = 'lossy';
    const p = pool(target, 3);
    await p.start();
    const bells: Doorbell[] = [];
    const spy = nc.subscribe(doorbellSubject(target), {
      callback: (_e, m) => {
        bells.push(Doorbell.parse(m.json()));
      },
    });
    const d = dispatcherTo(target);
    for (let i = 0; i < 30; i++) await grant(d, claimOf());
    await nc.flush();
    expect(await doneCount(target)).toBe(0); // nobody was told
    const dog = new Watchdog(store, { instance: I, maxAttempts: 3, ring: ringer(nc, I), intervalMs: 300 });
    dog.start();
    await eventually('30 claims done', async () => (await doneCount(target)) === 30);
    await dog.stop();
    await p.stop();
    spy.unsubscribe();
    expect(bells.length).toBeGreaterThan(0);
    expect(bells.every((b) => b.reason === 'watchdog')).toBe(true);
    expect([...p.runs.values()].every((n) => n === 1)).toBe(true);
  });

  it('svc1_ target: the second consumer stays idle, and takes over when the first stops', async () => {
    const target = 'svc1_inbox_test';
    const first = pool(target, 1);
    const second = pool(target, 1);
    await first.start();
    await second.start();
    const d = dispatcherTo(target, ringer(nc, I));
    for (let i = 0; i < 20; i++) await grant(d, claimOf());
    await eventually('svc1 claims done', async () => (await doneCount(target)) === 20);
    expect(first.runs.size).toBe(20);
    expect(second.runs.size).toBe(0);
    expect(second.workers[0]!.activeTargets).toEqual([]);
    await first.stop(); // releases the target lease; the standby picks it up
    for (let i = 0; i < 5; i++) await grant(d, claimOf());
    await eventually('standby takes over', async () => (await doneCount(target)) === 25);
    await second.stop();
    expect(second.runs.size).toBe(5);
  });

  it('runGrant (--execute-claim) runs exactly the row of that grant, once', async () => {
    const target = 'single';
    const [a, b] = [claimOf(), claimOf()];
    const d = dispatcherTo(target);
    for (const claim of [a, b]) await grant(d, claim);
    const p = pool(target, 1);
    expect(await p.workers[0]!.runGrant(a.id, ROLE)).toBe('done');
    expect(await pool(target, 1).workers[0]!.runGrant(a.id, ROLE)).toBe('no_row');
    expect([...p.runs.keys()]).toEqual([a.id]);
    expect(await doneCount(target)).toBe(1);
  });

  it('stop drains: a claim still running after the grace period is released and re-run elsewhere', async () => {
    const target = 'drain';
    let unblock = () => {};
    const blocked = new Promise<void>((r) => {
      unblock = r;
    });
    const slow = pool(target, 1, { hold: () => blocked });
    await slow.start();
    const d = dispatcherTo(target, ringer(nc, I));
    await grant(d, claimOf());
    await eventually('the slow worker to start', () => slow.runs.size === 1);
    await slow.stop(); // grace 200 ms, then release
    unblock();
    const fresh = pool(target, 1);
    await fresh.start();
    await eventually('the released claim to be re-run', async () => (await doneCount(target)) === 1);
    await fresh.stop();
    expect(fresh.runs.size).toBe(1);
  });
});

const rowOf = async (claimId: string) =>
  (
    await store.pool.query('SELECT * FROM holt.agent_inbox WHERE instance = $1 AND claim_id = $2', [
      I,
      claimId,
    ])
  ).rows[0] as {
    id: string;
    status: string;
    attempts: number;
    last_error: string | null;
    lease_owner: string;
  };

/** A worker whose execute holds until aborted (counting runs), for the drain tests. */
function holdingWorker(target: string, store_: InboxStore = store) {
  const runs: string[] = [];
  const worker = new InboxWorker({
    store: store_,
    nc,
    instance: I,
    targets: [target],
    concurrency: 1,
    leaseMs: 10_000,
    graceMs: 200,
    log: silentLogger(),
    execute: async (row: InboxRow, _f, signal) => {
      runs.push(row.claim_id);
      await new Promise((_, rej) => signal.addEventListener('abort', () => rej(signal.reason)));
    },
  });
  return { worker, runs };
}

describe('inbox worker shutdown and bad input', () => {
  it('stop() during runGrant (--execute-claim + SIGTERM) drains: grace, then release and abort', async () => {
    const target = 'grant-drain';
    const c = claimOf();
    const d = dispatcherTo(target);
    await grant(d, c);
    const { worker, runs } = holdingWorker(target);
    const outcome = worker.runGrant(c.id, ROLE);
    await eventually('the grant to start', () => runs.length === 1);
    await worker.stop();
    // stop() returned: the running claim was released (not left claimed under a closing pool)
    const row = await rowOf(c.id);
    expect(row.status).toBe('pending');
    expect(row.attempts).toBe(0);
    expect(await outcome).toBe('released');
  });

  it('rows a claim query returns after stop() began are handed back, never started', async () => {
    const target = 'fill-race';
    const c = claimOf();
    let inFlight = false;
    let open = () => {};
    const gate = new Promise<void>((r) => {
      open = r;
    });
    // The claim query commits its rows, then its answer is held back until stop() has begun.
    const slow = Object.create(store) as InboxStore;
    slow.claim = async (...args: Parameters<InboxStore['claim']>) => {
      const got = await store.claim(...args);
      if (got.length) {
        inFlight = true;
        await gate;
      }
      return got;
    };
    const { worker, runs } = holdingWorker(target, slow);
    const d = dispatcherTo(target);
    await grant(d, c);
    const started = worker.start();
    await eventually('the claim query to be in flight', () => inFlight);
    const stopped = worker.stop();
    open();
    await stopped;
    await started;
    expect(runs).toEqual([]);
    const row = await rowOf(c.id);
    expect(row.status).toBe('pending');
    expect(row.attempts).toBe(0);
  });

  it('a hung blackboard write does not pin the row: the completion is rolled back and retried', async () => {
    const target = 'hung-publish';
    const c = claimOf();
    let publishes = 0;
    const worker = new InboxWorker({
      store,
      nc,
      instance: I,
      targets: [target],
      concurrency: 1,
      leaseMs: 10_000,
      graceMs: 200,
      publishTimeoutMs: 300,
      retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 10 },
      log: silentLogger(),
      execute: async () => ({ ok: true }),
      publish: async (row) => {
        if (++publishes === 1) await new Promise(() => undefined); // Redis hangs, once
        await writeResult(bb, row, 'w');
      },
    });
    await worker.start();
    const d = dispatcherTo(target, ringer(nc, I));
    await grant(d, c);
    const dog = new Watchdog(store, { instance: I, maxAttempts: 3, ring: ringer(nc, I), intervalMs: 100 });
    dog.start(); // rings the row again once its backoff is over
    await eventually('the retried completion', async () => (await rowOf(c.id))?.status === 'done');
    await dog.stop();
    await worker.stop();
    const row = await rowOf(c.id);
    expect(row.last_error).toMatch(/completion failed: .*timed out/);
    expect(publishes).toBe(2);
  });

  it('a claimed row that does not parse is failed; the rest of its batch runs', async () => {
    const target = 'bad-row';
    const [bad, good] = [claimOf(), claimOf()];
    const d = dispatcherTo(target);
    for (const claim of [bad, good]) await grant(d, claim);
    await store.pool.query(`UPDATE holt.agent_inbox SET claim_type = 'bogus' WHERE claim_id = $1`, [bad.id]);
    const got = await store.claim(I, [target], 'owner-bad-row', 10, 10_000);
    expect(got.map((r) => r.claim_id)).toEqual([good.id]);
    const row = await rowOf(bad.id);
    expect(row.status).toBe('failed');
    expect(row.last_error).toMatch(/bad inbox row: claim_type/);
  });

  it('watchdog: a bad failed row or a throwing onFailed does not stop the others being reported', async () => {
    const inst = 'wd-bad-rows';
    const target = 'wd-bad';
    const claims = [claimOf(), claimOf(), claimOf()];
    const d = new InboxDispatcher({ store, instance: inst, targetOf: () => target, ring: () => undefined });
    for (const claim of claims) await grant(d, claim);
    await store.pool.query(`UPDATE holt.agent_inbox SET status = 'failed' WHERE instance = $1`, [inst]);
    // ordered by id: the first does not parse, the second's report throws, the third is fine
    const ids = (
      await store.pool.query('SELECT id, claim_id FROM holt.agent_inbox WHERE instance = $1 ORDER BY id', [
        inst,
      ])
    ).rows as { id: string; claim_id: string }[];
    await store.pool.query(`UPDATE holt.agent_inbox SET claim_type = 'bogus' WHERE id = $1`, [ids[0]!.id]);
    const reported: string[] = [];
    const r = await sweep(store, {
      instance: inst,
      maxAttempts: 3,
      ring: () => undefined,
      onFailed: async (row) => {
        if (row.claim_id === ids[1]!.claim_id) throw new Error('redis down');
        reported.push(row.claim_id);
      },
    });
    expect(reported).toEqual([ids[2]!.claim_id]);
    expect(r.reported).toBe(1);
    const flags = (
      await store.pool.query(
        'SELECT failure_reported FROM holt.agent_inbox WHERE instance = $1 ORDER BY id',
        [inst],
      )
    ).rows.map((x) => x.failure_reported);
    expect(flags).toEqual([true, false, true]); // the throwing one is retried next sweep
  });

  it('watchdog: every stage pages through all rows, and a stage that throws stops none of the others', async () => {
    const inst = 'wd-pages';
    const target = 'wd-pages';
    const d = new InboxDispatcher({ store, instance: inst, targetOf: () => target, ring: () => undefined });
    const claims = Array.from({ length: 14 }, claimOf);
    for (const claim of claims) await grant(d, claim);
    const ids = (
      await store.pool.query('SELECT id FROM holt.agent_inbox WHERE instance = $1 ORDER BY id', [inst])
    ).rows.map((x) => String(x.id));
    // Five failed, five parked on answered questions (q0..q4; no deadline), four claimed with expired leases.
    await store.pool.query(`UPDATE holt.agent_inbox SET status = 'failed' WHERE id = ANY($1)`, [
      ids.slice(0, 5),
    ]);
    for (const [i, id] of ids.slice(5, 10).entries())
      await store.pool.query(
        `UPDATE holt.agent_inbox SET status = 'waiting', waiting_on = $2, available_at = 'infinity' WHERE id = $1`,
        [id, `q${i}`],
      );
    await store.pool.query(
      `UPDATE holt.agent_inbox SET status = 'claimed', lease_owner = 'gone', lease_expires_at = now() - interval '1 minute'
       WHERE id = ANY($1)`,
      [ids.slice(10)],
    );
    const reported: string[] = [];
    const opts = {
      instance: inst,
      maxAttempts: 3,
      ring: () => undefined,
      batch: 2, // smaller than every stage's rows: one pass must page
      onFailed: async (row: InboxRow) => void reported.push(row.claim_id),
    };
    // The question check throws: its stage fails, and reclaiming and reporting still run all rows.
    const broken = await sweep(store, {
      ...opts,
      answered: async () => {
        throw new Error('blackboard down');
      },
    });
    expect(broken.failed).toEqual(['wake']);
    expect(broken.reclaimed).toHaveLength(4);
    expect(broken.reported).toBe(5);
    expect(reported.sort()).toEqual(
      claims
        .slice(0, 5)
        .map((c) => c.id)
        .sort(),
    );
    const fixed = await sweep(store, { ...opts, answered: async (qs) => qs });
    expect(fixed.failed).toEqual([]);
    expect(fixed.woken).toBe(5);
    const left = await store.pool.query(
      `SELECT count(*)::int AS n FROM holt.agent_inbox WHERE instance = $1 AND status IN ('waiting', 'claimed')`,
      [inst],
    );
    expect(left.rows[0].n).toBe(0);
  });

  it('Redis lost the output of a done row: the re-dispatched grant is reopened under a new epoch, and said so', async () => {
    const inst = 'reopen';
    let present = false;
    const reopened: string[] = [];
    const d = new InboxDispatcher({
      store,
      instance: inst,
      targetOf: () => 'reopen',
      ring: () => undefined,
      outputExists: async () => present,
      reopened: async (_g, reason) => void reopened.push(reason),
    });
    const claim = claimOf();
    const g = { claim, role: ROLE, claimType: 'claim' as const, phase: 'parallel' as const };
    await d.dispatch(g);
    const row = async () =>
      (
        await store.pool.query(
          `SELECT i.status, i.attempts, i.last_error, h.turn_epoch, t.status AS turn FROM holt.agent_inbox i
           JOIN holt.agent_state_head h ON h.instance = i.instance AND h.actor_id = i.actor_id
           JOIN holt.agent_turns t ON t.turn_id = i.turn_id WHERE i.instance = $1`,
          [inst],
        )
      ).rows[0];
    // A worker did it: done after two attempts, the turn done.
    await store.pool.query(`UPDATE holt.agent_inbox SET status = 'done', attempts = 2 WHERE instance = $1`, [
      inst,
    ]);
    await store.pool.query(`UPDATE holt.agent_turns SET status = 'done' WHERE instance = $1`, [inst]);
    const before = await row();
    // Its output is there: a re-dispatch changes nothing.
    present = true;
    await d.dispatch({ ...g, reason: 'recovery' });
    expect(await row()).toEqual(before);
    // Gone (Redis lost it): reopened, due now, a fresh count of attempts, the old fence dead.
    present = false;
    await d.dispatch({ ...g, reason: 'recovery' });
    const after = await row();
    expect(after).toMatchObject({ status: 'pending', attempts: 0, turn: 'queued' });
    expect(Number(after.turn_epoch)).toBe(Number(before.turn_epoch) + 1);
    expect(after.last_error).toMatch(/output artefact is missing/);
    expect(reopened).toHaveLength(1);
    // Once: a second re-dispatch of a pending row does not reopen it again.
    await d.dispatch({ ...g, reason: 'recovery' });
    expect(reopened).toHaveLength(1);
  });

  it('no inbox configured: a grant to a scalable role becomes a Failure artefact naming why', async () => {
    const log = silentLogger();
    const inbox = await startOrchestratorInbox({ instance: I, env: {}, bb, isLeader: () => true, log });
    const c = claimOf();
    await inbox.dispatcher.dispatch({ claim: c, role: 'Scaler', claimType: 'exclusive', phase: 'exclusive' });
    const a = await bb.getArtefact(outputId(I, c.id, 'Scaler', 'exclusive'));
    expect(a?.structural_type).toBe('Failure');
    expect(a?.payload).toMatch(/no inbox configured for scalable role Scaler/);
    await inbox.close();
  });
});
