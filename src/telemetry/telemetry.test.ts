import { context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from '../common/logger.ts';
import { componentEnvironment, toolEnvironment } from '../common/secrets.ts';
import { carrierEnv, carrierOf, contextFrom, parseCarrier } from './carrier.ts';
import { tracingSettings } from './settings.ts';
import { startTracing, type Tracing } from './tracing.ts';

const log = silentLogger();
const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('tracing settings (the standard OTEL_* variables)', () => {
  it('exports only with an endpoint; the generic endpoint gets /v1/traces, the per-signal one is used as is', () => {
    expect(tracingSettings({}).tracesUrl).toBeNull();
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318/' }).tracesUrl).toBe(
      'http://jaeger:4318/v1/traces',
    );
    expect(
      tracingSettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom',
      }).tracesUrl,
    ).toBe('http://b:4318/custom');
    expect(
      tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_SDK_DISABLED: 'true' }).tracesUrl,
    ).toBeNull();
    expect(
      tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_TRACES_EXPORTER: 'none' })
        .tracesUrl,
    ).toBeNull();
  });
  it('samplers: parent-based by default; a ratio from the argument; content off unless asked', () => {
    expect(tracingSettings({})).toMatchObject({ sampler: { parentBased: true, ratio: 1 }, contentChars: 0 });
    expect(
      tracingSettings({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })
        .sampler,
    ).toEqual({ parentBased: true, ratio: 0.25 });
    expect(tracingSettings({ OTEL_TRACES_SAMPLER: 'always_off' }).sampler).toEqual({
      parentBased: false,
      ratio: 0,
    });
    expect(tracingSettings({ HOLT_TRACE_CONTENT_CHARS: '2000' }).contentChars).toBe(2000);
  });
  it('a bad value is an error naming the variable', () => {
    expect(() => tracingSettings({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(
      /OTEL_TRACES_SAMPLER: must be one of/,
    );
    expect(() => tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT: must be a URL/,
    );
    expect(() => tracingSettings({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/only http\/protobuf/);
    expect(() => tracingSettings({ OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
  });
});

describe('trace context carriers (untrusted input)', () => {
  it('a valid traceparent is kept; malformed, all-zero or oversized ones are dropped, never thrown', () => {
    expect(parseCarrier({ traceparent: PARENT, tracestate: 'k=v' })).toEqual({
      traceparent: PARENT,
      tracestate: 'k=v',
    });
    for (const bad of [
      { traceparent: 'nope' },
      { traceparent: PARENT.toUpperCase() },
      { traceparent: `00-${'0'.repeat(32)}-b7ad6b7169203331-01` },
      { traceparent: `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01` },
      { traceparent: PARENT, tracestate: 'x'.repeat(600) },
      'a string',
      null,
    ])
      expect(parseCarrier(bad)).toBeUndefined();
  });
  it("a tool's environment names TRACEPARENT and TRACESTATE; no carrier, no variables", () => {
    expect(carrierEnv({ traceparent: PARENT, tracestate: 'k=v' })).toEqual({
      TRACEPARENT: PARENT,
      TRACESTATE: 'k=v',
    });
    expect(carrierEnv(undefined)).toEqual({});
  });
});

describe('tracing variables on their way', () => {
  it('holt up hands OTEL_* to its components; a tool gets only its TRACEPARENT, never the exporter headers', () => {
    const env = {
      PATH: '/bin',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer t0ken-abcdef',
      REDIS_URL: 'redis://:pw@r:6379',
    };
    expect(componentEnvironment(env)).toEqual({
      PATH: '/bin',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer t0ken-abcdef',
    });
    const tool = toolEnvironment(env, carrierEnv({ traceparent: PARENT }));
    expect(tool).toEqual({ PATH: '/bin', TRACEPARENT: PARENT });
  });
});

describe('a program that traces', () => {
  let t: Tracing | undefined;
  afterEach(async () => {
    await t?.shutdown();
    t = undefined;
  });

  it('a log line written inside a span names its trace and span; outside one, neither', async () => {
    t = startTracing('test', tracingSettings({}), log, {
      processors: [new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() })],
    });
    const lines: string[] = [];
    const logger = createLogger('test', {}, { write: (l: string) => void lines.push(l) });
    const span = t.tracer.startSpan('step');
    context.with(trace.setSpan(context.active(), span), () => logger.info({ event_type: 'inside' }));
    span.end();
    logger.info({ event_type: 'outside' });
    const [inside, outside] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(inside).toMatchObject({
      trace_id: span.spanContext().traceId,
      span_id: span.spanContext().spanId,
    });
    expect(outside).not.toHaveProperty('trace_id');
  });

  it('with tracing off, a trace passes through unchanged and nothing is recorded', async () => {
    t = startTracing('test', tracingSettings({}), log);
    expect(t.exporting).toBe(false);
    const span = t.tracer.startSpan('step', {}, contextFrom(parseCarrier({ traceparent: PARENT })));
    expect(span.isRecording()).toBe(false);
    expect(carrierOf(trace.setSpan(context.active(), span))?.traceparent).toBe(PARENT);
    span.end();
    expect(carrierOf()).toBeUndefined();
  });

  it('a span continues a remote parent; a child made in its context nests under it; the carrier names the child', async () => {
    const spans = new InMemorySpanExporter();
    t = startTracing('test', tracingSettings({}), log, {
      processors: [new SimpleSpanProcessor({ exporter: spans })],
    });
    const tracer = t.tracer;
    const parent = tracer.startSpan('claim', {}, contextFrom(parseCarrier({ traceparent: PARENT })));
    const carried = await context.with(trace.setSpan(context.active(), parent), async () => {
      const child = tracer.startSpan('execute_tool');
      const c = carrierOf(trace.setSpan(context.active(), child));
      child.end();
      return c;
    });
    parent.end();
    const [child, claim] = spans.getFinishedSpans();
    expect(claim?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(claim?.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(child?.parentSpanContext?.spanId).toBe(claim?.spanContext().spanId);
    expect(carried?.traceparent).toBe(
      `00-0af7651916cd43dd8448eb211c80319c-${child?.spanContext().spanId}-01`,
    );
    expect(claim?.resource.attributes['service.name']).toBe('holt-test');
  });
});
