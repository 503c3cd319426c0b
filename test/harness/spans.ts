import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { silentLogger } from '../../src/common/logger.ts';
import { tracingSettings } from '../../src/telemetry/settings.ts';
import { startTracing } from '../../src/telemetry/tracing.ts';

/**
 * Tracing as a program starts it (the context manager, the W3C propagator, a tracer provider), with
 * every finished span kept in memory for the test to read instead of exported. `stop` ends it.
 */
export function recordSpans(program = 'test'): {
  spans: InMemorySpanExporter;
  stop: () => Promise<void>;
} {
  const spans = new InMemorySpanExporter();
  const tracing = startTracing(program, tracingSettings({}), silentLogger(), {
    processors: [new SimpleSpanProcessor({ exporter: spans })],
  });
  return { spans, stop: () => tracing.shutdown() };
}
