import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { type RedisServer, startRedis } from '../local/redis.ts';
import type { Orchestrator } from './orchestrator.ts';
import { RedisServerWatch } from './redis-server.ts';
import { captureLogs, claimFor, newGoal, register, startOrchestrator } from './testkit.ts';

/**
 * Redis restored from an older snapshot under a running leader (drill R4). Without AOF, a restart
 * loads the last SAVE: a write made after it is gone, whatever the leader remembers of it.
 */

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function snapshotRedis(): Promise<RedisServer> {
  const redis = await startRedis({ aof: false });
  cleanups.push(() => redis.stop());
  return redis;
}

describe('Redis restored from an older snapshot', () => {
  it('RedisServerWatch: the same server is not a change; a restarted one is, and so is one it cannot read', async () => {
    const redis = await snapshotRedis();
    // Fails at once while the server is down, instead of queueing.
    const conn = new Redis(redis.url, { enableOfflineQueue: false });
    conn.on('error', () => undefined);
    cleanups.push(() => conn.disconnect());
    await eventually('connected', async () => (await conn.ping()) === 'PONG');
    const watch = new RedisServerWatch(conn);
    await watch.remember();
    expect(await watch.changed()).toBe(false);
    await redis.restart(0);
    await eventually('the connection back', async () => (await conn.ping()) === 'PONG');
    expect(await watch.changed()).toBe(true);
    expect(await watch.changed()).toBe(false);
    await redis.stop();
    expect(await watch.changed()).toBe(true);
  });

  it('an artefact whose claim the restore lost (snapshot between the two writes) gets a claim from the same term', async () => {
    const redis = await snapshotRedis();
    const instance = `r${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    bb.redis.on('error', () => undefined);
    cleanups.push(() => bb.close());
    // A role that never bids: the claim only has to exist, and nothing else writes.
    await register(bb, ['Silent']);
    const goal = newGoal();
    // Claim writes wait until the snapshot is taken: the window a loaded machine opens between an
    // artefact and its claim (the live path's and the reconcile's alike).
    let released = false;
    let held: () => void = () => undefined;
    const hold = new Promise<void>((r) => {
      held = r;
    });
    let reached: () => void = () => undefined;
    const atClaim = new Promise<void>((r) => {
      reached = r;
    });
    const { logger, lines } = captureLogs();
    const orch: Orchestrator = startOrchestrator(
      redis.url,
      instance,
      // The lease outlives the restart: the same term carries on (a new term's catch-up reads all anyway).
      { bidTimeoutMs: 3_600_000, leaseTtlMs: 60_000 },
      {
        logger,
        onStep: async (name) => {
          if (name !== 'before_create_claim' || released) return;
          reached();
          await hold;
        },
      },
    );
    cleanups.push(() => orch.stop());
    await orch.whenLeader();
    await bb.createArtefact(goal);
    await atClaim;
    await bb.redis.call('SAVE'); // the goal is in the snapshot, its claim is not
    released = true;
    held();
    const before = await claimFor(bb, goal.id); // the leader has seen the goal and claimed it
    await redis.restart(0); // no save at shutdown: back as of the snapshot
    await eventually('Redis back without the claim', async () => (await bb.redis.ping()) === 'PONG');

    const after = await claimFor(bb, goal.id);
    expect(after.id).not.toBe(before.id); // a new claim: the old one was lost with the restore
    expect(lines.filter((l) => l.event_type === 'lease_acquired')).toHaveLength(1);
    expect(lines.some((l) => l.event_type === 'redis_server_changed')).toBe(true);
  });
});
