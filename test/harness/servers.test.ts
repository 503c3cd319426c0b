import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../src/common/pg.ts';
import { retryOnPortClash } from '../../src/local/ports.ts';
import { findBinary, MissingBinaryError } from './bins.ts';
import { type NatsServer, startNats } from './nats.ts';
import { type PostgresServer, startPostgres } from './postgres.ts';
import { type RedisServer, startRedis } from './redis.ts';

let redis: RedisServer;
let nats: NatsServer;
let postgres: PostgresServer;

beforeAll(async () => {
  [redis, nats, postgres] = await Promise.all([startRedis(), startNats(), startPostgres()]);
});
afterAll(async () => {
  await Promise.all([redis?.stop(), nats?.stop(), postgres?.stop()]);
});

describe('harness: real servers', () => {
  it('redis: round trip', async () => {
    const r = new Redis(redis.url);
    await r.set('k', 'v');
    expect(await r.get('k')).toBe('v');
    r.disconnect();
  });

  it('redis: AOF variant keeps data across a restart', async () => {
    const durable = await startRedis({ aof: true });
    try {
      const r = new Redis(durable.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
      await r.connect();
      await r.set('kept', '1');
      r.disconnect();
      await durable.restart();
      const r2 = new Redis(durable.url);
      expect(await r2.get('kept')).toBe('1');
      r2.disconnect();
    } finally {
      await durable.stop();
    }
  });

  it('nats: publish/subscribe and a JetStream stream', async () => {
    const nc = await connect({ servers: nats.url });
    const sub = nc.subscribe('hello.*', { max: 1 });
    nc.publish('hello.world', 'hi');
    for await (const m of sub) expect(m.string()).toBe('hi');

    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'EVENTS', subjects: ['evt.>'] });
    const js = jetstream(nc);
    const ack = await js.publish('evt.one', 'payload');
    expect(ack.seq).toBe(1);
    const got = await jsm.streams.getMessage('EVENTS', { seq: 1 });
    expect(got?.string()).toBe('payload');
    await nc.close();
  });

  it('postgres: FOR UPDATE SKIP LOCKED hands each row to one claimer', async () => {
    const pool = createPool(postgres.url, { max: 4 });
    await pool.query('CREATE TABLE q (id int PRIMARY KEY, taken bool NOT NULL DEFAULT false)');
    await pool.query('INSERT INTO q (id) SELECT generate_series(1, 2)');
    const a = await pool.connect();
    const b = await pool.connect();
    await a.query('BEGIN');
    await b.query('BEGIN');
    const claim = 'SELECT id FROM q WHERE NOT taken ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED';
    const ra = await a.query<{ id: number }>(claim);
    const rb = await b.query<{ id: number }>(claim);
    expect(ra.rows[0]?.id).toBe(1);
    expect(rb.rows[0]?.id).toBe(2);
    await a.query('COMMIT');
    await b.query('COMMIT');
    a.release();
    b.release();
    await pool.end();
  });

  it('a missing binary says to run make setup', () => {
    expect(() => findBinary('definitely-not-installed-holt-bin', ['/nonexistent'])).toThrow(
      MissingBinaryError,
    );
    expect(() => findBinary('definitely-not-installed-holt-bin')).toThrow(/run `make setup`/);
  });
});

describe('harness: a port taken between the pick and the bind', () => {
  it('a server that loses its port is started again on new ones; any other failure is not retried', async () => {
    // The first attempt is made to lose (the port of a running NATS), the second picks its own.
    let tries = 0;
    const second = await retryOnPortClash(() =>
      ++tries === 1 ? startNats({ port: nats.port }) : startNats(),
    );
    try {
      expect(tries).toBe(2);
      expect(second.port).not.toBe(nats.port);
      const nc = await connect({ servers: second.url });
      await nc.flush();
      await nc.close();
    } finally {
      await second.stop();
    }
    // Redis too: another Redis on the port answers PING, so readiness asks for this process's pid.
    let redisTries = 0;
    const r2 = await retryOnPortClash(() =>
      ++redisTries === 1 ? startRedis({ port: redis.port }) : startRedis(),
    );
    try {
      expect(redisTries).toBe(2);
      expect(r2.port).not.toBe(redis.port);
    } finally {
      await r2.stop();
    }
    let other = 0;
    await expect(
      retryOnPortClash(async () => {
        other++;
        throw new Error('bad config');
      }),
    ).rejects.toThrow('bad config');
    expect(other).toBe(1);
  });
});
