import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { z } from 'zod';
import type { Logger } from '../common/logger.ts';
import { jsonOf } from './message.ts';
import { subjectToken, toolRequestSubject, toolResultSubject } from './subjects.ts';

/**
 * Asynchronous tools over NATS (seed 001 §tools): a turn's call goes out as a request on
 * `cmd.tool.<name>`, whose reply subject is the calling agent's result subject; a tool service answers
 * with `msg.respond(...)`. The service holds no store credential: the pup records the answer, once, and
 * only for a call that waits for it.
 */

export const ToolRequest = z.object({
  instance: z.string(),
  role: z.string(),
  turn_id: z.uuid(),
  tool_call_id: z.string(),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()),
  deadline_ms: z.number().int(),
});
export type ToolRequest = z.infer<typeof ToolRequest>;

/** A tool service's answer: the call it answers, and its output (or an error). */
export const ToolResult = z.object({
  turn_id: z.uuid(),
  tool_call_id: z.string().min(1).max(200),
  ok: z.boolean().default(true),
  output: z
    .string()
    .max(64 * 1024)
    .default(''),
  error: z.string().max(4096).optional(),
});
export type ToolResult = z.infer<typeof ToolResult>;

/** Sends a request; the reply subject is where the answer must go. Lossy (core NATS): the deadline covers it. */
export function publishToolRequest(nc: NatsConnection, req: ToolRequest): void {
  nc.publish(toolRequestSubject(req.tool), JSON.stringify(req), {
    reply: toolResultSubject(req.instance, req.role),
  });
}

/**
 * Listens for the agent's tool results in a queue group (one pup records each). A malformed answer is
 * logged and dropped: the call's deadline gives the model a timeout report instead.
 */
export function subscribeToolResults(
  nc: NatsConnection,
  instance: string,
  role: string,
  onResult: (r: ToolResult) => void,
  log?: Logger,
): Subscription {
  return nc.subscribe(toolResultSubject(instance, role), {
    queue: `holt_tools_${subjectToken(instance)}_${subjectToken(role)}`,
    callback: (err, msg) => {
      if (err) return;
      const raw = jsonOf(msg);
      const r = ToolResult.safeParse(raw);
      if (!r.success) {
        log?.warn(
          { event_type: 'tool_result_invalid', error: r.error.issues[0]?.message },
          'tool result dropped',
        );
        return;
      }
      onResult(r.data);
    },
  });
}
