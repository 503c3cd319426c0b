import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { createLogger, silentLogger } from '../common/logger.ts';
import { InboxStore } from '../inbox/store.ts';
import { migrate } from '../state/migrate.ts';
import type { Outcome } from './executor.ts';
import { loadWorkerEnv, startInboxWorker } from './inbox-worker.ts';
import { config } from './testkit.ts';

let pgs: PostgresServer;
let nats: NatsServer;
let store: InboxStore;

beforeAll(async () => {
  [pgs, nats] = await Promise.all([startPostgres(), startNats()]);
  await migrate(pgs.url);
  store = InboxStore.connect(pgs.url, { max: 2 });
});
afterAll(async () => {
  await store?.close();
  await Promise.all([pgs?.stop(), nats?.stop()]);
});

describe('inbox worker lease owner', () => {
  it('HOLT_POD_NAME is the lease_owner of the rows a worker holds (scale-in spares busy pods)', async () => {
    const instance = `i${randomUUID().slice(0, 8)}`;
    const env = {
      HOLT_INSTANCE_NAME: instance,
      HOLT_AGENT_NAME: 'coder',
      HOLT_MODE: 'worker',
      HOLT_BIDDING_STRATEGY: '',
      DATABASE_URL: pgs.url,
      NATS_URL: nats.url,
      HOLT_POD_NAME: 'coders-7d9f-abcde',
    };
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    let finish!: (o: Outcome) => void;
    const outcome = new Promise<Outcome>((r) => {
      finish = r;
    });
    const w = await startInboxWorker({
      cfg: config(env),
      env: loadWorkerEnv(env),
      // Never reached: the run below ends in a retryable outcome, nothing is published.
      bb: {} as Blackboard,
      executor: {
        execute: async () => {
          started();
          return outcome;
        },
      },
      log: silentLogger(),
    });
    try {
      expect(w.worker.owner).toBe('coders-7d9f-abcde');
      await store.enqueue({
        instance,
        workerTarget: 'coder',
        claimId: 'c1',
        role: 'coder',
        claimType: 'claim',
        phase: 'exclusive',
      });
      await w.worker.start();
      await running;
      const r = await store.pool.query<{ lease_owner: string; status: string }>(
        'SELECT lease_owner, status FROM holt.agent_inbox WHERE instance = $1',
        [instance],
      );
      expect(r.rows).toEqual([{ lease_owner: 'coders-7d9f-abcde', status: 'claimed' }]);
    } finally {
      finish('error');
      await w.close();
    }
  });

  it('without HOLT_POD_NAME (local mode) the owner is unique per process', async () => {
    const env = loadWorkerEnv({ DATABASE_URL: pgs.url, NATS_URL: nats.url, HOLT_POD_NAME: '' });
    expect(env.HOLT_POD_NAME).toBeUndefined();
  });
});

describe('inbox worker start', () => {
  // A claim Job's pod may reach its stores a moment after it starts (a NetworkPolicy engine admits its
  // address late): refused connections are waited out, a refusal of another kind is not.
  const env = (natsUrl: string, dbUrl = pgs.url) => ({
    HOLT_INSTANCE_NAME: 'late',
    HOLT_AGENT_NAME: 'coder',
    HOLT_MODE: 'worker',
    HOLT_BIDDING_STRATEGY: '',
    DATABASE_URL: dbUrl,
    NATS_URL: natsUrl,
  });
  const start = (e: Record<string, string>, lines: string[], tries = 40) =>
    startInboxWorker({
      cfg: config(e),
      env: loadWorkerEnv(e),
      bb: {} as Blackboard,
      executor: { execute: async () => 'success' as Outcome },
      log: createLogger('worker-test', {}, sink(lines)),
      patience: { tries, baseMs: 50, maxMs: 200 },
    });

  it('waits for a NATS that is not listening yet, saying so, then starts', async () => {
    const late = await startNats();
    const { port } = late;
    await late.stop(); // the port now refuses connections
    const lines: string[] = [];
    let again: NatsServer | undefined;
    const restart = setTimeout(() => {
      void startNats({ port }).then((n) => {
        again = n;
      });
    }, 1_000);
    try {
      const w = await start(env(late.url), lines);
      await w.close();
      expect(
        lines.some((l) => l.includes('"event_type":"store_unreachable"') && l.includes('"store":"nats"')),
      ).toBe(true);
    } finally {
      clearTimeout(restart);
      await again?.stop();
    }
  });

  it('gives up at once on an error that waiting cannot mend (a refused login)', async () => {
    const bad = pgs.url.replace(/\/\/([^:@/]+)(:[^@]*)?@/, '//nobody:wrong@');
    const lines: string[] = [];
    await expect(start(env(nats.url, bad), lines, 3)).rejects.toThrow(/password|authentication|role/i);
    expect(lines.filter((l) => l.includes('store_unreachable'))).toEqual([]);
  });
});

function sink(lines: string[]): Writable {
  return new Writable({
    write(chunk, _e, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
}
