import type { Blackboard } from './client.ts';
import { releaseLeaseScript, renewLeaseScript } from './pup-scripts.ts';

/**
 * A pup's lease on one execution (extension key `pup:execution:{output id}`), so no two pups run one
 * grant at once; it expires on its own when its holder dies.
 */

/** extension key: a pup's lease on one execution (its output artefact id), so no two pups run it at once. */
export function executionLeaseKey(bb: Blackboard, outputId: string): string {
  return `${bb.k.prefix}pup:execution:${outputId}`;
}

/** Takes the execution lease if free; it expires on its own if the holder dies. */
export async function acquireExecution(
  bb: Blackboard,
  outputId: string,
  owner: string,
  ttlMs: number,
): Promise<boolean> {
  return (await bb.redis.set(executionLeaseKey(bb, outputId), owner, 'PX', ttlMs, 'NX')) === 'OK';
}

/** Extends a held execution lease; false when it is no longer ours (it ran out and was taken). */
export async function renewExecution(
  bb: Blackboard,
  outputId: string,
  owner: string,
  ttlMs: number,
): Promise<boolean> {
  return (
    (await renewLeaseScript.run(bb.redis, [executionLeaseKey(bb, outputId)], [owner, String(ttlMs)])) === 1
  );
}

export async function releaseExecution(bb: Blackboard, outputId: string, owner: string): Promise<void> {
  await releaseLeaseScript.run(bb.redis, [executionLeaseKey(bb, outputId)], [owner]);
}
