import { workerTarget } from '../blackboard/targets.ts';

/** Worker targets are one NATS subject token of [a-z0-9_-]: no `.`, `*`, `>` or spaces (docs/agent-worker.md § Doorbells). */
export function assertWorkerTarget(target: string): string {
  const r = workerTarget.safeParse(target);
  if (!r.success)
    throw new Error(`invalid worker target ${JSON.stringify(target)}: ${r.error.issues[0]?.message}`);
  return r.data;
}

export const doorbellSubject = (target: string) => `cmd.agent.${assertWorkerTarget(target)}.wakeup`;

/** Actor ids are UUIDs, hence single tokens too. */
export const agentEventSubject = (actorId: string, kind: 'step' | 'task' | 'chunk' | 'life' | 'delivery') => {
  if (!/^[A-Za-z0-9_-]+$/.test(actorId)) throw new Error(`invalid actor id ${JSON.stringify(actorId)}`);
  return `evt.agent.${actorId}.${kind}`;
};

/** Any name as one subject token (what is not [A-Za-z0-9_-] becomes `_`). */
export const subjectToken = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');

/** The queue group of a target's workers; per instance, so Holts sharing a NATS never steal bells. */
export const workerQueue = (instance: string, target: string) =>
  `holt_${subjectToken(instance)}_${assertWorkerTarget(target)}`;

/** A tool name: one subject token (the Agent's schema keeps them short and plain). */
export function assertToolName(tool: string): string {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(tool)) throw new Error(`invalid tool name ${JSON.stringify(tool)}`);
  return tool;
}

/**
 * An asynchronous tool's requests (src/bus/tools.ts): per instance and tool, so a tool service's NATS
 * user can be allowed one tool of one instance and nothing else (src/access/nats.ts toolPermissions).
 */
export const toolRequestSubject = (instance: string, tool: string) =>
  `cmd.tool.${subjectToken(instance)}.${assertToolName(tool)}`;

/** Where the outcomes a token's `nats:<tool>` callback names are delivered (the tool's service hears it). */
export const toolOutcomeSubject = (instance: string, tool: string) =>
  `${toolRequestSubject(instance, tool)}.outcome`;

/** A call's reply id: 128 random bits as hex, unguessable, kept with the call's wait row. */
export const REPLY_ID = /^[0-9a-f]{32}$/;

/**
 * Where one asynchronous call's answer comes back: the agent, the tool and the call's reply id. Only
 * who received the request may answer on it (nats-server's allow_responses); the pup records an answer
 * only for the waiting call with that reply id and that tool.
 */
export function toolReplySubject(instance: string, role: string, tool: string, replyId: string): string {
  if (!REPLY_ID.test(replyId)) throw new Error('invalid reply id');
  return `evt.tool.${subjectToken(instance)}.${subjectToken(role)}.${assertToolName(tool)}.${replyId}`;
}

/** All of one agent's answers (the pup's subscription). */
export const toolRepliesSubject = (instance: string, role: string) =>
  `evt.tool.${subjectToken(instance)}.${subjectToken(role)}.*.*`;

/** A living agent's wake doorbell: the ingress rings it after queueing a message or a wake hint. */
export const lifeWakeSubject = (instance: string, role: string) =>
  `cmd.life.${subjectToken(instance)}.${subjectToken(role)}`;

/** Every living agent's wake bell of an instance. */
export const lifeWakesSubject = (instance: string) => `cmd.life.${subjectToken(instance)}.*`;

/** One kind of event of every agent. */
export const agentEventsSubject = (kind: 'step' | 'task' | 'chunk' | 'life' | 'delivery') =>
  `evt.agent.*.${kind}`;
