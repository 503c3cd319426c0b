import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { connectBus } from '../bus/connect.ts';
import { ringer } from '../bus/doorbell.ts';
import { silentLogger } from '../common/logger.ts';
import { resultArtefactId } from '../state/ids.ts';
import { migrate } from '../state/migrate.ts';
import { InboxStore } from './store.ts';
import { fakeClaim, ROLE, writeResult } from './testkit.ts';
import { Watchdog } from './watchdog.ts';
import { InboxWorker, type Outcome } from './worker.ts';

const I = 'crash-test';
let pg: PostgresServer;
let nats: NatsServer;
let redis: RedisServer;
let store: InboxStore;
let nc: NatsConnection;
let bb: Blackboard;
const children: ChildProcess[] = [];

beforeAll(async () => {
  [pg, nats, redis] = await Promise.all([startPostgres(), startNats(), startRedis()]);
  await migrate(pg.url);
  store = InboxStore.connect(pg.url);
  nc = await connectBus(nats.url, 'crash-test');
  bb = Blackboard.connect(redis.url, I);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await bb?.close();
  await nc?.drain();
  await store?.close();
  await Promise.all([pg?.stop(), nats?.stop(), redis?.stop()]);
});

/** A worker process; resolves each stdout line it prints into `lines`. */
function spawnWorker(target: string, leaseMs: number, holdMs: number) {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'fixtures', 'child-worker.ts')], {
    env: {
      ...process.env,
      DATABASE_URL: pg.url,
      NATS_URL: nats.url,
      REDIS_URL: redis.url,
      INSTANCE: I,
      TARGET: target,
      LEASE_MS: String(leaseMs),
      HOLD_MS: String(holdMs),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const lines: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
  return { child, lines, saw: (l: string) => eventually(l, () => lines.includes(l)) };
}

/** The survivor: an in-process worker plus the watchdog that notices the lost lease. */
function survivor(target: string) {
  const runs: string[] = [];
  const outcomes: Outcome[] = [];
  const worker = new InboxWorker({
    store,
    nc,
    instance: I,
    targets: [target],
    concurrency: 2,
    leaseMs: 10_000,
    log: silentLogger(),
    execute: async (row) => {
      runs.push(row.claim_id);
      return { by: 'survivor' };
    },
    publish: async (row) => void (await writeResult(bb, row, 'survivor')),
    onOutcome: (_row, o) => outcomes.push(o),
  });
  const dog = new Watchdog(store, { instance: I, maxAttempts: 5, ring: ringer(nc, I), intervalMs: 100 });
  return { worker, dog, runs, outcomes };
}

describe('worker crash and partition', () => {
  it('a worker killed with SIGKILL mid-tool: another re-runs the claim, one result artefact', async () => {
    const target = 'crash';
    const claim = fakeClaim();
    const { row } = await store.enqueue({
      instance: I,
      workerTarget: target,
      claimId: claim.id,
      role: ROLE,
      claimType: 'claim',
      phase: 'exclusive',
    });
    const w = spawnWorker(target, 500, 60_000);
    await w.saw(`EXECUTING ${claim.id}`);
    w.child.kill('SIGKILL');
    const s = survivor(target);
    await s.worker.start();
    s.dog.start();
    await eventually('the claim to be re-run', async () => (await store.row(row.id))?.status === 'done');
    await s.dog.stop();
    await s.worker.stop();
    expect(s.runs).toEqual([claim.id]);
    expect(w.lines.some((l) => l.startsWith('PUBLISH'))).toBe(false);
    const art = await bb.getArtefact(resultArtefactId(claim.id, ROLE, row.turn_id));
    expect(JSON.parse(art!.payload)).toMatchObject({ by: 'survivor' });
    expect((await store.row(row.id))?.attempts).toBe(2);
    expect(await store.turn(row.turn_id)).toMatchObject({ status: 'done', result: { by: 'survivor' } });
  });

  it('a stale worker that wakes after its lease was taken writes nothing', async () => {
    const target = 'stale';
    const claim = fakeClaim();
    const { row } = await store.enqueue({
      instance: I,
      workerTarget: target,
      claimId: claim.id,
      role: ROLE,
      claimType: 'claim',
      phase: 'exclusive',
    });
    // Finishes its "tool" 1.5 s in; frozen meanwhile, so its 300 ms lease lapses.
    const w = spawnWorker(target, 300, 1500);
    await w.saw(`EXECUTING ${claim.id}`);
    w.child.kill('SIGSTOP');
    const s = survivor(target);
    await s.worker.start();
    s.dog.start();
    await eventually('the claim to be taken over', async () => (await store.row(row.id))?.status === 'done');
    await s.dog.stop();
    w.child.kill('SIGCONT');
    await w.saw(`OUTCOME ${claim.id} stale`);
    await s.worker.stop();
    expect(w.lines.some((l) => l.startsWith('PUBLISH'))).toBe(false);
    const art = await bb.getArtefact(resultArtefactId(claim.id, ROLE, row.turn_id));
    expect(JSON.parse(art!.payload)).toMatchObject({ by: 'survivor' });
    expect(await store.turn(row.turn_id)).toMatchObject({ status: 'done', result: { by: 'survivor' } });
    w.child.kill('SIGTERM');
  });
});
