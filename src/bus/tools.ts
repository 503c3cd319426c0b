import { randomBytes } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { z } from 'zod';
import type { Logger } from '../common/logger.ts';
import { jsonOf, traceHeaders } from './message.ts';
import {
  REPLY_ID,
  subjectToken,
  toolRepliesSubject,
  toolReplySubject,
  toolRequestSubject,
} from './subjects.ts';

/**
 * Asynchronous tools over NATS (docs/runtime-model.md § Tools): a turn's call goes out as a request on
 * `cmd.tool.<instance>.<name>`, whose reply subject is the call's own
 * (`evt.tool.<instance>.<role>.<name>.<reply id>`, the reply id 128 random bits kept with the call's
 * wait row); a tool service answers with `msg.respond(...)`. The service holds no store credential: the
 * pup records the answer, once, and only for the waiting call with that reply id and that tool.
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
  /** The tool it answers for; when given, it must be the call's tool. */
  tool: z.string().max(64).optional(),
  ok: z.boolean().default(true),
  output: z
    .string()
    .max(64 * 1024)
    .default(''),
  error: z.string().max(4096).optional(),
});
export type ToolResult = z.infer<typeof ToolResult>;

/** An answer as heard: what its subject says (the call's tool and reply id) and its body. */
export type ToolAnswer = ToolResult & { replyTool: string; replyId: string };

/** A new call's reply id (unguessable: another service cannot answer a call it was not sent). */
export const newReplyId = (): string => randomBytes(16).toString('hex');

/** Sends a request; its reply subject is the call's own. Lossy (core NATS): the deadline covers it. */
export function publishToolRequest(nc: NatsConnection, req: ToolRequest, replyId: string): void {
  nc.publish(toolRequestSubject(req.instance, req.tool), JSON.stringify(req), {
    reply: toolReplySubject(req.instance, req.role, req.tool, replyId),
    // The tool service may continue the call's trace (the execute_tool span).
    ...traceHeaders(),
  });
}

/**
 * Listens for the agent's tool answers in a queue group (one pup records each). An answer whose body or
 * subject does not parse is dropped and told to `onDropped`: the call's deadline gives the model a
 * timeout report instead.
 */
export function subscribeToolResults(
  nc: NatsConnection,
  instance: string,
  role: string,
  onResult: (r: ToolAnswer) => void,
  log?: Logger,
  onDropped?: () => void,
): Subscription {
  return nc.subscribe(toolRepliesSubject(instance, role), {
    queue: `holt_tools_${subjectToken(instance)}_${subjectToken(role)}`,
    callback: (err, msg) => {
      if (err) return;
      const tokens = msg.subject.split('.');
      const replyId = tokens.at(-1) ?? '';
      const replyTool = tokens.at(-2) ?? '';
      if (msg.headers?.code === 503) {
        // nats-server's "no responders": no tool service heard the request; its deadline still holds.
        log?.warn(
          { event_type: 'tool_request_unheard', tool: replyTool },
          'no tool service heard the request',
        );
        return;
      }
      const r = ToolResult.safeParse(jsonOf(msg));
      if (!r.success || !REPLY_ID.test(replyId)) {
        log?.warn(
          {
            event_type: 'tool_result_invalid',
            error: r.success ? 'not a reply subject' : r.error.issues[0]?.message,
          },
          'tool result dropped',
        );
        onDropped?.();
        return;
      }
      onResult({ ...r.data, replyTool, replyId });
    },
  });
}
