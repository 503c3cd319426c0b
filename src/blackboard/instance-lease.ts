import type { Blackboard } from './client.ts';
import { acquireLockScript, releaseLockScript } from './scripts.ts';

/** The single-orchestrator lease of an instance (Holt's `lock` key, its value format kept for Holt's tools). */

/** Takes or renews the single-orchestrator lease. Holt's lock value format is kept for its tools. */
export async function acquireLock(bb: Blackboard, holder: string, ttlMs: number): Promise<boolean> {
  const value = `orchestrator:${Math.floor(Date.now() / 1000)}`;
  const res = await acquireLockScript.run(
    bb.redis,
    [bb.k.lock, `${bb.k.lock}:holder`],
    [holder, ttlMs, value],
  );
  return res === 1;
}

export async function releaseLock(bb: Blackboard, holder: string): Promise<void> {
  await releaseLockScript.run(bb.redis, [bb.k.lock, `${bb.k.lock}:holder`], [holder]);
}

export async function lockHolder(bb: Blackboard): Promise<string | null> {
  return bb.redis.get(`${bb.k.lock}:holder`);
}
