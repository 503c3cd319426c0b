import { randomBytes } from 'node:crypto';
import { type Context, context, defaultTextMapSetter, ROOT_CONTEXT } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { z } from 'zod';

/**
 * W3C trace context as it rides on Holt's own records (artefacts, claims, inbox rows, turns, NATS
 * headers) and in a tool's environment. It comes from untrusted hands too (a caller's `traceparent`,
 * a payload), so it is parsed: a malformed one is dropped, never trusted and never an error.
 */
// version 00, 32-hex trace id, 16-hex parent id, 2-hex flags; all-zero ids are invalid (W3C).
export const TraceParent = z
  .string()
  .regex(/^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/, 'must be a W3C traceparent');
export const TraceState = z.string().max(512);
export const TraceCarrier = z.object({ traceparent: TraceParent, tracestate: TraceState.optional() });
export type TraceCarrier = z.infer<typeof TraceCarrier>;

// The propagator is used directly (not the global one): trace context is carried whether or not this
// process exports spans, so a trace passes through a Holt whose tracing is off without a break.
const w3c = new W3CTraceContextPropagator();

/** The carrier of a context (the active one by default), or undefined when it holds no valid span. */
export function carrierOf(ctx: Context = context.active()): TraceCarrier | undefined {
  const out: Record<string, string> = {};
  w3c.inject(ctx, out, defaultTextMapSetter);
  return parseCarrier(out);
}

/** A carrier from untrusted input (a header map, a stored field), or undefined when malformed or absent. */
export function parseCarrier(input: unknown): TraceCarrier | undefined {
  const r = TraceCarrier.safeParse(input);
  return r.success ? r.data : undefined;
}

/** The carrier of a stored row's nullable `traceparent`/`tracestate` columns, or undefined. */
export function carrierOfRow(row: {
  traceparent: string | null;
  tracestate: string | null;
}): TraceCarrier | undefined {
  if (!row.traceparent) return undefined;
  return parseCarrier({
    traceparent: row.traceparent,
    ...(row.tracestate ? { tracestate: row.tracestate } : {}),
  });
}

/** The context a carrier continues (the remote parent), or `base` when there is none. */
export function contextFrom(carrier: TraceCarrier | undefined, base: Context = ROOT_CONTEXT): Context {
  if (!carrier) return base;
  return w3c.extract(base, carrier, {
    get: (c, k) => (k === 'traceparent' ? c.traceparent : k === 'tracestate' ? c.tracestate : undefined),
    keys: () => ['traceparent', 'tracestate'],
  });
}

/** A tool's environment: TRACEPARENT/TRACESTATE, the names other tools (and otel-cli) read. */
export function carrierEnv(carrier: TraceCarrier | undefined): Record<string, string> {
  if (!carrier) return {};
  return {
    TRACEPARENT: carrier.traceparent,
    ...(carrier.tracestate ? { TRACESTATE: carrier.tracestate } : {}),
  };
}

/**
 * A new trace, for a workflow nobody traced yet (a goal from a caller without trace context): random
 * W3C ids, sampled. Its root has no span of its own; every span of the workflow shares its trace id.
 */
export function newTraceCarrier(): TraceCarrier {
  return { traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01` };
}

/** The trace id of a record's stored `traceparent` (what Jaeger and Tempo look a trace up by), if valid. */
export function traceIdOf(x: { traceparent?: string }): string | undefined {
  return parseCarrier({ traceparent: x.traceparent })?.traceparent.slice(3, 35);
}

/** A record's trace fields, set ones only, to copy onto a record that continues its trace (a claim on
 * an artefact, a feedback claim, the orchestrator's Failure). Tracestate never goes without a parent. */
export function traceFieldsOf(x: { traceparent?: string; tracestate?: string }): {
  traceparent?: string;
  tracestate?: string;
} {
  if (!x.traceparent) return {};
  return { traceparent: x.traceparent, ...(x.tracestate ? { tracestate: x.tracestate } : {}) };
}
