import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { freePort } from '../../test/harness/ports.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { silentLogger } from '../common/logger.ts';
import { withClient } from '../common/pg.ts';
import { createToken } from '../ingress/tokens.ts';
import { ensureSchema } from '../state/migrate.ts';
import type { Orchestrator } from './orchestrator.ts';
import { register, startOrchestrator, startServedIngress } from './testkit.ts';

// The orchestrator's ingress follows its lease (real Redis, Postgres, NATS, two orchestrators): the
// leader serves, a standby answers 503 with Retry-After and queues nothing, and it serves once it leads.

let redis: RedisServer;
let pg: PostgresServer;
let nats: NatsServer;
let dir: string;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [redis, pg, nats] = await Promise.all([startRedis(), startPostgres(), startNats()]);
  await ensureSchema(pg.url, silentLogger());
  dir = makeTempDir('orch-ingress');
});
afterAll(async () => {
  for (const s of stops.splice(0).reverse()) await s().catch(() => undefined);
  await Promise.all([redis?.stop(), pg?.stop(), nats?.stop()]);
  removeDir(dir);
});

describe("the orchestrator's ingress", () => {
  it('only the lease holder serves; a standby answers 503 and queues nothing, until it leads', async () => {
    const instance = `i${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    stops.push(() => bb.close());
    await register(bb, ['Writer']);
    const file = join(dir, 'tokens.json');
    const token = createToken(file, { name: 'ci', role: 'Writer', modes: ['enqueue_message'] }).token;
    const serve = async (orch: Orchestrator) => {
      const env = {
        DATABASE_URL: pg.url,
        NATS_URL: nats.url,
        HOLT_INGRESS_PORT: String(await freePort()),
        HOLT_INGRESS_TOKENS_FILE: file,
      };
      const ingress = await startServedIngress(orch, { instance, env, bb });
      stops.push(() => ingress.close());
      return (key: string) =>
        fetch(`http://127.0.0.1:${ingress.port}/v1/agents/Writer/messages`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'idempotency-key': key,
            'content-type': 'application/json',
          },
          body: JSON.stringify({ text: key }),
        });
    };
    // A long lease (a slow machine never loses it mid-test); the leader's stop hands it over at once.
    const leader = startOrchestrator(redis.url, instance, { leaseTtlMs: 30_000 });
    stops.push(() => leader.stop());
    await leader.whenLeader();
    const standby = startOrchestrator(redis.url, instance, { leaseTtlMs: 30_000 });
    stops.push(() => standby.stop());
    const toLeader = await serve(leader);
    const toStandby = await serve(standby);
    expect((await toLeader('first')).status).toBe(202);
    const refused = await toStandby('second');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error: string }).error).toContain('standby');
    const queued = () =>
      withClient(pg.url, async (c) =>
        (
          await c.query<{ body: string }>(
            'SELECT body FROM holt.agent_messages WHERE instance = $1 ORDER BY id',
            [instance],
          )
        ).rows.map((r) => r.body),
      );
    expect(await queued()).toEqual(['first']);
    // The leader hands the lease over; the former standby now serves.
    await leader.stop();
    await eventually('the standby leads', () => standby.isLeader());
    expect((await toStandby('second')).status).toBe(202);
    expect(await queued()).toEqual(['first', 'second']);
  });
});
