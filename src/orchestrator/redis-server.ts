import type { Redis } from 'ioredis';
import { withTimeout } from '../common/timeout.ts';

/** The Redis server process's run id (INFO server): new at every start; undefined when unreadable. */
export async function redisRunId(redis: Redis): Promise<string | undefined> {
  try {
    return /^run_id:([0-9a-f]+)\r?$/m.exec(await withTimeout(redis.info('server'), 2_000, 'INFO'))?.[1];
  } catch {
    return undefined;
  }
}

/**
 * Tells whether the Redis behind a connection is another server process than at the last look: one
 * restarted (from its AOF, or from an older snapshot), failed over or restored may have lost any write
 * made before, so what a reader remembers of it (say, "this artefact has its claim") is no longer
 * known. A server whose run id cannot be read counts as changed: a needless catch-up costs reads, a
 * missed one leaves work hanging.
 */
export class RedisServerWatch {
  private readonly redis: Redis;
  private runId: string | undefined;

  constructor(redis: Redis) {
    this.redis = redis;
  }

  /** Notes the server now (a term's start): later calls of `changed` compare with it. */
  async remember(): Promise<void> {
    this.runId = await redisRunId(this.redis);
  }

  /** Whether the server is another (or unreadable) since the last look; notes it for the next. */
  async changed(): Promise<boolean> {
    const now = await redisRunId(this.redis);
    const changed = now === undefined || now !== this.runId;
    this.runId = now;
    return changed;
  }
}
