import type { Redis } from 'ioredis';
import type { z } from 'zod';
import { BlackboardDataError } from './codec.ts';

/** Writes a published JSON value (a report or a load the leader owns) under `key`. */
export async function writeJsonKey<T>(redis: Redis, key: string, value: T): Promise<void> {
  await redis.set(key, JSON.stringify(value));
}

/** The published value, or null before anyone published one. Throws BlackboardDataError (`what`) if malformed. */
export async function readJsonKey<S extends z.ZodType>(
  redis: Redis,
  key: string,
  schema: S,
  what: string,
): Promise<z.infer<S> | null> {
  const raw = await redis.get(key);
  if (raw === null) return null;
  try {
    return schema.parse(JSON.parse(raw));
  } catch (e) {
    throw new BlackboardDataError(what, key, e);
  }
}
