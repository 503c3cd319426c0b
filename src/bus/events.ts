import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { agentEventSubject } from './subjects.ts';

const base = { actor_id: z.uuid(), turn_id: z.uuid(), turn_epoch: z.number().int(), at_ms: z.number().int() };

/** `evt.agent.{actor}.step`: phase of an execution (started, completed, ...). */
export const StepEvent = z.object({
  ...base,
  phase: z.enum(['started', 'planning', 'executing', 'completed', 'failed', 'released']),
  claim_id: z.string(),
  role: z.string(),
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
});
export type TaskEvent = z.infer<typeof TaskEvent>;

/** `evt.agent.{actor}.chunk`: lossy streaming output, never a state trigger. */
export const ChunkEvent = z.object({ ...base, seq: z.number().int().nonnegative(), text: z.string() });
export type ChunkEvent = z.infer<typeof ChunkEvent>;

export interface AgentEvents {
  step(e: StepEvent): void;
  task(e: TaskEvent): void;
  chunk(e: ChunkEvent): void;
}

/** Publishes agent events on NATS; each event is validated before it leaves. */
export function natsAgentEvents(nc: NatsConnection): AgentEvents {
  return {
    step: (e) => nc.publish(agentEventSubject(e.actor_id, 'step'), JSON.stringify(StepEvent.parse(e))),
    task: (e) => nc.publish(agentEventSubject(e.actor_id, 'task'), JSON.stringify(TaskEvent.parse(e))),
    chunk: (e) => nc.publish(agentEventSubject(e.actor_id, 'chunk'), JSON.stringify(ChunkEvent.parse(e))),
  };
}

export const noAgentEvents: AgentEvents = {
  step: () => undefined,
  task: () => undefined,
  chunk: () => undefined,
};
