import {
  type Attributes,
  type Context,
  context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { carrierOf, contextFrom, parseCarrier, type TraceCarrier, traceIdOf } from './carrier.ts';
import { TRACER_NAME } from './tracing.ts';

/**
 * Attribute names of the OpenTelemetry GenAI semantic conventions (v1.37+, still "development": the
 * conventions advise copying them rather than importing the incubating entry point).
 */
export const GEN_AI = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  finishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  agentName: 'gen_ai.agent.name',
  conversationId: 'gen_ai.conversation.id',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
} as const;
export const ERROR_TYPE = 'error.type';

/**
 * Runs `fn` inside a new active span (children made within nest under it, carriers name it), ends the
 * span whatever happens, and marks it failed with `error.type` when `fn` throws. `classify` names the
 * error class (never the message: a message may quote a payload).
 */
export async function inSpan<T>(
  name: string,
  opts: {
    kind?: SpanKind;
    attributes?: Attributes;
    classify?: (e: unknown) => string;
    /** The parent (a carrier's context, contextFrom): the active context by default. */
    parent?: Context;
  },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = opts.parent ?? context.active();
  const span = trace
    .getTracer(TRACER_NAME)
    .startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (e) {
    const cls = opts.classify?.(e) ?? (e instanceof Error ? e.name : 'error');
    span.setAttribute(ERROR_TYPE, cls);
    span.setStatus({ code: SpanStatusCode.ERROR, message: cls });
    throw e;
  } finally {
    span.end();
  }
}

/**
 * A span written after the fact (a wait, a workflow, a late bid: known only once over), with its times
 * given, under `parent`; its events at their own times; failed with `errorType` when given.
 */
export function pastSpan(
  name: string,
  o: {
    parent: Context;
    startMs: number;
    endMs: number;
    attributes: Attributes;
    events?: readonly { name: string; attributes?: Attributes; atMs: number }[];
    errorType?: string;
  },
): void {
  const span = trace
    .getTracer(TRACER_NAME)
    .startSpan(name, { kind: SpanKind.INTERNAL, startTime: o.startMs, attributes: o.attributes }, o.parent);
  for (const e of o.events ?? []) span.addEvent(e.name, e.attributes, e.atMs);
  if (o.errorType) markFailed(span, o.errorType);
  span.end(Math.max(o.startMs, o.endMs));
}

/** The carrier naming `span` itself, whatever context is active (a process without a context manager
 * too): what a record written for the span's work carries on. */
export function spanCarrier(span: Span): TraceCarrier | undefined {
  return carrierOf(trace.setSpan(ROOT_CONTEXT, span));
}

/** Marks a span failed without an exception (an outcome that is a failure: a tool's exit code, a Failure). */
export function markFailed(span: Span, errorType: string): void {
  span.setAttribute(ERROR_TYPE, errorType);
  span.setStatus({ code: SpanStatusCode.ERROR, message: errorType });
}

/** The context a claim's work continues: the claimed artefact's trace, else whatever is active. */
export function claimContext(claim: { traceparent?: string; tracestate?: string }): Context {
  const c = parseCarrier({ traceparent: claim.traceparent, tracestate: claim.tracestate });
  return c ? contextFrom(c) : context.active();
}

/** The context of work on a claim that may already run inside a span of the claim's own trace (the
 * inbox attempt that runs it): that span, so the work nests under it; else the claim's context. */
export function workContext(claim: { traceparent?: string; tracestate?: string }): Context {
  const active = trace.getSpanContext(context.active());
  return active && active.traceId === traceIdOf(claim) ? context.active() : claimContext(claim);
}

/**
 * An agent's work on a grant (a command agent's run, an LLM turn) as its `invoke_agent {role}` span in
 * the claim's trace (GenAI conventions), under the inbox attempt that runs it if any; `extra` adds the
 * caller's own attributes.
 */
export function invokeAgent<T>(
  role: string,
  claim: { id: string; traceparent?: string; tracestate?: string },
  extra: Attributes,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return inSpan(
    `invoke_agent ${role}`,
    {
      attributes: {
        [GEN_AI.operation]: 'invoke_agent',
        [GEN_AI.agentName]: role,
        'holt.claim.id': claim.id,
        ...extra,
      },
      parent: workContext(claim),
    },
    fn,
  );
}

/** Content for a span attribute: only when the setting allows it, and capped (`contentChars`, 0 = off). */
export function contentAttribute(value: unknown, contentChars: number): string | undefined {
  if (contentChars <= 0) return undefined;
  const s = typeof value === 'string' ? value : JSON.stringify(value);
  return s.length > contentChars ? `${s.slice(0, contentChars)}…[truncated]` : s;
}

export { SpanKind };
