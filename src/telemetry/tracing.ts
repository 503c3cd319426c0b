import { context, propagation, type Tracer, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Logger } from '../common/logger.ts';
import { VERSION } from '../common/version.ts';
import type { TracingSettings } from './settings.ts';

/** A program's tracing: its tracer, and a shutdown that flushes what is still buffered. */
export interface Tracing {
  readonly exporting: boolean;
  readonly tracer: Tracer;
  shutdown(): Promise<void>;
}

/** The instrumentation scope of every Holt span. */
export const TRACER_NAME = 'holt';

function samplerOf(s: TracingSettings['sampler']): Sampler {
  const root =
    s.ratio >= 1
      ? new AlwaysOnSampler()
      : s.ratio <= 0
        ? new AlwaysOffSampler()
        : new TraceIdRatioBasedSampler(s.ratio);
  return s.parentBased ? new ParentBasedSampler({ root }) : root;
}

/**
 * Starts a program's tracing (its composition root calls this once). The context manager is always
 * set, so spans nest within the process. Without an endpoint no provider is registered: spans are
 * non-recording and cost next to nothing, and nothing leaves the process. `processors` are for tests
 * (an in-memory exporter beside or instead of OTLP).
 */
export function startTracing(
  program: string,
  settings: TracingSettings,
  log: Logger,
  extra: { attributes?: Record<string, string>; processors?: SpanProcessor[] } = {},
): Tracing {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const processors = [...(extra.processors ?? [])];
  if (settings.tracesUrl)
    processors.push(new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: settings.tracesUrl }) }));
  if (!processors.length)
    return { exporting: false, tracer: trace.getTracer(TRACER_NAME, VERSION), shutdown: async () => {} };
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: settings.serviceName ?? `holt-${program}`,
      [ATTR_SERVICE_VERSION]: VERSION,
      ...extra.attributes,
    }),
    sampler: samplerOf(settings.sampler),
    spanProcessors: processors,
  });
  trace.setGlobalTracerProvider(provider);
  // Only the host of the endpoint: a URL may carry credentials in its user part or query.
  log.info(
    { event_type: 'tracing_started', endpoint: settings.tracesUrl ? new URL(settings.tracesUrl).host : null },
    'exporting traces',
  );
  return {
    exporting: true,
    tracer: trace.getTracer(TRACER_NAME, VERSION),
    async shutdown() {
      await provider
        .shutdown()
        .catch((e: unknown) =>
          log.warn({ event_type: 'tracing_shutdown_failed', error: String(e) }, 'could not flush traces'),
        );
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
