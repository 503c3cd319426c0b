import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { ERROR_CLASSES } from '../blackboard/error-class.ts';
import { traceHeaders } from './message.ts';
import { agentEventSubject } from './subjects.ts';

const base = { actor_id: z.uuid(), turn_id: z.uuid(), turn_epoch: z.number().int(), at_ms: z.number().int() };

/**
 * `evt.agent.{actor}.step`: phase of an execution (started, completed, ...). `replied`: a model reply
 * was stored, with the tokens the model reported for it. `executing` with `progress`: a long MCP call's
 * server reported how far it is.
 */
export const StepEvent = z.object({
  ...base,
  phase: z.enum(['started', 'planning', 'replied', 'executing', 'completed', 'failed', 'released']),
  claim_id: z.string(),
  role: z.string(),
  /** With `executing`: the tool that runs (an MCP call's `server__tool`). */
  tool: z.string().optional(),
  /** With `executing`: a progress notification of that call, as its server sent it. */
  progress: z
    .object({ done: z.number(), total: z.number().optional(), message: z.string().max(200).optional() })
    .optional(),
  usage: z
    .object({
      prompt_tokens: z.number().int().nonnegative(),
      completion_tokens: z.number().int().nonnegative(),
    })
    .optional(),
});
export type StepEvent = z.infer<typeof StepEvent>;

/** `evt.agent.{actor}.task`: the one terminal event of a turn, naming its deliverable. */
export const TaskEvent = z.object({
  ...base,
  status: z.enum(['success', 'failed', 'timeout']),
  claim_id: z.string(),
  role: z.string(),
  deliverable_id: z.string().nullable(),
  error: z.string().optional(),
  /** Which kind of failure (src/blackboard/error-class.ts), with a failed status. */
  error_class: z.enum(ERROR_CLASSES).optional(),
});
export type TaskEvent = z.infer<typeof TaskEvent>;

/** `evt.agent.{actor}.chunk`: lossy streaming output, never a state trigger. */
export const ChunkEvent = z.object({ ...base, seq: z.number().int().nonnegative(), text: z.string() });
export type ChunkEvent = z.infer<typeof ChunkEvent>;

/**
 * `evt.agent.{actor}.life`: a living agent's scheduler acted (a turn started, resumed or ticked), with
 * what was delivered to the turn and each delivery's provenance labels.
 */
export const LifeEvent = z.object({
  actor_id: z.uuid(),
  role: z.string(),
  decision: z.enum(['start', 'tick', 'resume']),
  why: z.string(),
  turn_id: z.uuid().optional(),
  at_ms: z.number().int(),
  delivered: z.array(
    z.object({
      id: z.string(),
      kind: z.enum(['message', 'wake']),
      origin: z.string(),
      surface: z.string(),
      admission: z.string(),
      authority: z.string(),
    }),
  ),
});
export type LifeEvent = z.infer<typeof LifeEvent>;

/** Publishes a life event (lossy, like every event: a failure is dropped, never thrown). */
export function publishLifeEvent(nc: NatsConnection, e: LifeEvent): boolean {
  try {
    nc.publish(agentEventSubject(e.actor_id, 'life'), JSON.stringify(LifeEvent.parse(e)), traceHeaders());
    return true;
  } catch {
    return false;
  }
}

/**
 * An attempt to deliver a message's outcome to its callback (the orchestrator's delivery loop): how it
 * went, never the URL's secrets nor the outcome's text (the receiver has it; events are for watching).
 */
export const DeliveryEvent = z.object({
  actor_id: z.uuid(),
  role: z.string(),
  delivery_id: z.uuid(),
  message_id: z.string(),
  callback: z.string(),
  state: z.enum(['delivered', 'retrying', 'failed']),
  outcome: z.string(),
  attempt: z.number().int(),
  status: z.number().int().nullable(),
  error: z.string().optional(),
  at_ms: z.number().int(),
});
export type DeliveryEvent = z.infer<typeof DeliveryEvent>;

/** Publishes a delivery event (lossy, like every event). */
export function publishDeliveryEvent(nc: NatsConnection, e: DeliveryEvent): boolean {
  try {
    nc.publish(agentEventSubject(e.actor_id, 'delivery'), JSON.stringify(DeliveryEvent.parse(e)));
    return true;
  } catch {
    return false;
  }
}

export interface AgentEvents {
  step(e: StepEvent): void;
  task(e: TaskEvent): void;
  chunk(e: ChunkEvent): void;
}

/**
 * Publishes agent events on NATS; each event is validated before it leaves. Lossy by contract: an
 * event that cannot be published (NATS closed, an invalid event) is dropped and counted through
 * `onDrop`, never thrown into the run that emitted it.
 */
export function natsAgentEvents(
  nc: NatsConnection,
  onDrop?: (kind: string, error: unknown) => void,
): AgentEvents {
  const send = <T>(kind: 'step' | 'task' | 'chunk', schema: z.ZodType<T>, actor: string, e: T) => {
    try {
      nc.publish(agentEventSubject(actor, kind), JSON.stringify(schema.parse(e)), traceHeaders());
    } catch (err) {
      onDrop?.(kind, err);
    }
  };
  return {
    step: (e) => send('step', StepEvent, e.actor_id, e),
    task: (e) => send('task', TaskEvent, e.actor_id, e),
    chunk: (e) => send('chunk', ChunkEvent, e.actor_id, e),
  };
}

export const noAgentEvents: AgentEvents = {
  step: () => undefined,
  task: () => undefined,
  chunk: () => undefined,
};
