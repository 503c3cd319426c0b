import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { silentLogger } from '../../src/common/logger.ts';
import { tracingSettings } from '../../src/telemetry/settings.ts';
import { startTracing } from '../../src/telemetry/tracing.ts';
import { type Jaeger, type JaegerSpan, parentSpanId, startJaeger } from './jaeger.ts';
import { eventually } from './wait.ts';

/**
 * Tracing as a program starts it, exporting every span at once over OTLP/HTTP (protobuf, the
 * product's exporter) to a real Jaeger the test starts; the test reads what arrived back from
 * Jaeger's query API. What a test asserts is then what a user's backend receives, not what the SDK
 * holds in memory.
 */

/** A span as Jaeger stores it, its tags and events as plain records. */
export interface SeenSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  service: string;
  /** The span's attributes, and the tags Jaeger derives (`span.kind`, `otel.status_code`, …). */
  attributes: Record<string, unknown>;
  /** Each event's name (its `event` field) and other fields. */
  events: { name: string; attributes: Record<string, unknown> }[];
  /** Microseconds, as Jaeger keeps them. */
  startTime: number;
  duration: number;
}

export function seen(s: JaegerSpan): SeenSpan {
  const record = (tags: { key: string; value: unknown }[]) =>
    Object.fromEntries(tags.map((t) => [t.key, t.value]));
  return {
    name: s.operationName,
    traceId: s.traceID,
    spanId: s.spanID,
    parentSpanId: parentSpanId(s),
    service: s.process.serviceName,
    attributes: record(s.tags),
    events: s.logs.map((l) => {
      const { event, ...rest } = record(l.fields);
      return { name: String(event), attributes: rest };
    }),
    startTime: s.startTime,
    duration: s.duration,
  };
}

export interface JaegerSpans {
  jaeger: Jaeger;
  /** The spans of one trace Jaeger holds now (none when it has not seen the trace). */
  trace(traceId: string): Promise<SeenSpan[]>;
  /** Waits until the trace holds a span named `name` (and `count` of them when given), and returns them. */
  named(traceId: string, name: string, count?: number): Promise<SeenSpan[]>;
  /** The spans of `service` named `operation` (with these attribute values) Jaeger holds, after a flush. */
  find(service: string, operation: string, tags?: Record<string, string>): Promise<SeenSpan[]>;
  /** Waits until every span ended so far has been exported (before asserting that one was not). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/** A Jaeger of the test's own, and this process's tracing exporting to it as service `holt-<program>`. */
export async function exportSpansToJaeger(program = 'test'): Promise<JaegerSpans> {
  const jaeger = await startJaeger();
  const exporter = new OTLPTraceExporter({ url: `${jaeger.otlpHttpUrl}/v1/traces` });
  const processor = new SimpleSpanProcessor({ exporter });
  const tracing = startTracing(program, tracingSettings({}), silentLogger(), { processors: [processor] });
  const trace = async (traceId: string) => ((await jaeger.trace(traceId))?.spans ?? []).map(seen);
  return {
    jaeger,
    trace,
    named: (traceId, name, count = 1) =>
      eventually(`${count} span(s) '${name}' of trace ${traceId} in Jaeger`, async () => {
        const found = (await trace(traceId)).filter((s) => s.name === name);
        return found.length >= count ? found : undefined;
      }),
    flush: () => processor.forceFlush(),
    async find(service, operation, tags) {
      await processor.forceFlush();
      const traces = await jaeger.traces(service, { operation, ...(tags ? { tags } : {}) });
      const wanted = Object.entries(tags ?? {});
      return traces
        .flatMap((t) => t.spans.map(seen))
        .filter((s) => s.name === operation && wanted.every(([k, v]) => String(s.attributes[k]) === v));
    },
    async stop() {
      await tracing.shutdown();
      await jaeger.stop();
    },
  };
}
