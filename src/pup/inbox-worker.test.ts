import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { silentLogger } from '../common/logger.ts';
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
