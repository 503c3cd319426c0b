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

/** Any name as one subject token (what is not [A-Za-z0-9_-] becomes `_`). */
export const subjectToken = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');

/** The queue group of a target's workers; per instance, so Holts sharing a NATS never steal bells. */
export const workerQueue = (instance: string, target: string) =>
  `holt_${subjectToken(instance)}_${assertWorkerTarget(target)}`;

/** An asynchronous tool's requests (src/bus/tools.ts); tool names are single tokens already. */
export const toolRequestSubject = (tool: string) => {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(tool)) throw new Error(`invalid tool name ${JSON.stringify(tool)}`);
  return `cmd.tool.${tool}`;
};

/** Where a living agent's asynchronous tool results come back (one subject per instance and role). */
export const toolResultSubject = (instance: string, role: string) =>
  `evt.tool.${subjectToken(instance)}.${subjectToken(role)}.result`;

/** A living agent's wake doorbell: the ingress rings it after queueing a message or a wake hint. */
export const lifeWakeSubject = (instance: string, role: string) =>
  `cmd.life.${subjectToken(instance)}.${subjectToken(role)}`;
