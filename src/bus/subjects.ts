import { workerTarget } from '../api/common.ts';

/** Worker targets are one NATS subject token of [a-z0-9_-]: no `.`, `*`, `>` or spaces (seed 001 §3.1). */
export function assertWorkerTarget(target: string): string {
  const r = workerTarget.safeParse(target);
  if (!r.success)
    throw new Error(`invalid worker target ${JSON.stringify(target)}: ${r.error.issues[0]?.message}`);
  return r.data;
}

export const doorbellSubject = (target: string) => `cmd.agent.${assertWorkerTarget(target)}.wakeup`;

/** Actor ids are UUIDs, hence single tokens too. */
export const agentEventSubject = (actorId: string, kind: 'step' | 'task' | 'chunk' | 'life') => {
  if (!/^[A-Za-z0-9_-]+$/.test(actorId)) throw new Error(`invalid actor id ${JSON.stringify(actorId)}`);
  return `evt.agent.${actorId}.${kind}`;
};

/** The queue group of a target's workers; per instance, so Holts sharing a NATS never steal bells. */
export const workerQueue = (instance: string, target: string) =>
  `holt_${instance.replace(/[^A-Za-z0-9_-]/g, '_')}_${assertWorkerTarget(target)}`;
