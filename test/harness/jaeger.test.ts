import { randomUUID } from 'node:crypto';
import { context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Jaeger, parentSpanId, startJaeger, TracesResponse, tagValue } from './jaeger.ts';
import { eventually } from './wait.ts';

/** A provider exporting through OTLP HTTP/protobuf, as the runtime will (src/telemetry, issue 32). */
function provider(jaeger: Jaeger, service: string): TracerProvider {
  return new TracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: service }),
    spanProcessors: [
      new SimpleSpanProcessor({
        exporter: new OTLPTraceExporter({ url: `${jaeger.otlpHttpUrl}/v1/traces` }),
      }),
    ],
  });
}

/** A parent span and a child with attributes, ended and flushed; their ids. */
async function exportPair(jaeger: Jaeger, service: string) {
  const tp = provider(jaeger, service);
  const tracer = tp.getTracer('holt-harness-test');
  const parent = tracer.startSpan('workflow');
  const child = tracer.startSpan(
    'execute_tool grep',
    { attributes: { 'gen_ai.tool.name': 'grep', 'holt.test.count': 3 } },
    trace.setSpan(context.active(), parent),
  );
  child.end();
  parent.end();
  await tp.forceFlush();
  await tp.shutdown();
  return {
    traceId: parent.spanContext().traceId,
    parent: parent.spanContext().spanId,
    child: child.spanContext().spanId,
  };
}

describe('Jaeger harness (a real trace backend)', () => {
  let a: Jaeger;
  let b: Jaeger;
  beforeAll(async () => {
    // Two at once, as two test files would run them: free ports, no clash.
    [a, b] = await Promise.all([startJaeger(), startJaeger()]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('stores spans exported by OTLP HTTP/protobuf and gives them back with parent and attributes', async () => {
    const service = `harness-${randomUUID().slice(0, 8)}`;
    expect(await a.services()).toEqual([]); // a fresh instance: Jaeger answers data null
    const ids = await exportPair(a, service);
    const [t] = await eventually(
      'the trace with both spans',
      async () => {
        const traces = await a.traces(service);
        return traces.length === 1 && traces[0]?.spans.length === 2 && traces;
      },
      { describe: () => a.proc.tail() },
    );
    if (!t) throw new Error('no trace');
    expect(t.traceID).toBe(ids.traceId);
    const parent = t.spans.find((s) => s.operationName === 'workflow');
    const child = t.spans.find((s) => s.operationName === 'execute_tool grep');
    expect(parent?.spanID).toBe(ids.parent);
    expect(child?.spanID).toBe(ids.child);
    expect(parentSpanId(parent!)).toBeUndefined();
    expect(child?.references).toEqual([{ refType: 'CHILD_OF', traceID: ids.traceId, spanID: ids.parent }]);
    expect(tagValue(child!, 'gen_ai.tool.name')).toBe('grep');
    expect(tagValue(child!, 'holt.test.count')).toBe(3);
    expect(tagValue(parent!, 'gen_ai.tool.name')).toBeUndefined();
    expect(child?.process.serviceName).toBe(service);
    expect(await a.services()).toContain(service);
    // By id: the same trace; an id Jaeger never saw is undefined, not an error.
    expect((await a.trace(ids.traceId))?.spans.map((s) => s.spanID).sort()).toEqual(
      [ids.child, ids.parent].sort(),
    );
    expect(await a.trace('0123456789abcdef0123456789abcdef')).toBeUndefined();
  });

  it('keeps each instance apart: spans sent to one are not in the other', async () => {
    const service = `apart-${randomUUID().slice(0, 8)}`;
    const ids = await exportPair(b, service);
    await eventually('the trace in b', async () => (await b.trace(ids.traceId))?.spans.length === 2);
    expect(await a.trace(ids.traceId)).toBeUndefined();
    expect(await a.traces(service)).toEqual([]);
    expect(a.otlpHttpUrl).not.toBe(b.otlpHttpUrl);
    expect(a.queryUrl).not.toBe(b.queryUrl);
  });

  it('rejects query JSON that is not the documented shape', () => {
    const bad = {
      data: [{ traceID: 't', spans: [{ traceID: 't', operationName: 'x', startTime: 1, duration: 1 }] }],
    };
    expect(TracesResponse.safeParse(bad).success).toBe(false);
  });
});
