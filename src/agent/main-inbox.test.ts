import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import { InboxStore } from '../inbox/store.ts';
import { grantedClaim, node, pupEnv } from '../pup/testkit.ts';
import { migrate } from '../state/migrate.ts';

/** `--execute-claim` with an inbox configured: never runs a grant outside its inbox row's fence. */

const I = 'proc-inbox';
let redis: RedisServer;
let pg: PostgresServer;
let nats: NatsServer;
let bb: Blackboard;
let store: InboxStore;
let ws: string;
beforeAll(async () => {
  [redis, pg, nats] = await Promise.all([startRedis(), startPostgres(), startNats()]);
  await migrate(pg.url);
  store = InboxStore.connect(pg.url, { max: 2 });
  bb = Blackboard.connect(redis.url, I);
  ws = makeTempDir('ws');
});
afterAll(async () => {
  await bb?.close();
  await store?.close();
  await Promise.all([redis?.stop(), pg?.stop(), nats?.stop()]);
  removeDir(ws);
});

function runPup(args: string[]) {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'main.ts'), ...args], {
    env: {
      ...process.env,
      ...pupEnv({
        REDIS_URL: redis.url,
        HOLT_INSTANCE_NAME: I,
        HOLT_WORKSPACE: ws,
        HOLT_BIDDING_STRATEGY: '',
        HOLT_AGENT_COMMAND: JSON.stringify(node('echo.mjs')),
        DATABASE_URL: pg.url,
        NATS_URL: nats.url,
      }),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout?.on('data', (b) => {
    stdout += b;
  });
  return new Promise<{ code: number | null; stdout: string }>((resolve) =>
    child.on('exit', (code) => resolve({ code, stdout })),
  );
}

describe('pup --execute-claim with an inbox', () => {
  it('the grant row held by another worker: exits 0 and runs nothing (no unfenced fallback)', async () => {
    const { claim } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
    });
    await store.enqueue({
      instance: I,
      workerTarget: 'coder',
      claimId: claim.id,
      role: 'coder',
      claimType: 'exclusive',
      phase: 'exclusive',
    });
    const held = await store.claimGrant(I, claim.id, 'coder', 'other-worker', 60_000);
    expect(held?.status).toBe('claimed');
    const r = await runPup(['--execute-claim', claim.id]);
    expect(r.code).toBe(0);
    expect(await bb.getArtefact(outputId(I, claim.id, 'coder', 'exclusive'))).toBeNull();
    const finished = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((e) => e.event_type === 'worker_finished');
    expect(finished).toMatchObject({
      outcome: 'no_row',
      rows: ['exclusive: claimed (held by other-worker)'],
    });
    expect((await store.row(held!.id))?.lease_owner).toBe('other-worker');
  });
});
