import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { call, submit } from '../../test/harness/llm.ts';
import { silentLogger } from '../common/logger.ts';
import { tracingSettings } from '../telemetry/settings.ts';
import { startTracing, type Tracing } from '../telemetry/tracing.ts';
import { llmKit } from './llm.testkit.ts';

const { stores, setup, grantAndRun, lastTool } = llmKit('llm-tracing');
const spans = new InMemorySpanExporter();
let tracing: Tracing;
beforeAll(() => {
  tracing = startTracing('pup', tracingSettings({}), silentLogger(), {
    processors: [new SimpleSpanProcessor({ exporter: spans })],
  });
});
afterAll(() => tracing.shutdown());
beforeEach(() => spans.reset());

/** A declared tool that prints the trace context it was given. */
const traceTool = {
  name: 'show_trace',
  description: 'prints TRACEPARENT',
  parameters: { type: 'object', properties: {} },
  argv: [process.execPath, '-e', 'console.log("tp=" + process.env.TRACEPARENT)'],
};

const named = (prefix: string) => spans.getFinishedSpans().filter((s) => s.name.startsWith(prefix));
const only = (name: string): ReadableSpan => {
  const found = spans.getFinishedSpans().filter((s) => s.name === name);
  expect(found, name).toHaveLength(1);
  return found[0]!;
};
const tp = (s: ReadableSpan) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`;

describe('an LLM turn traced (GenAI semantic conventions)', () => {
  it('invoke_agent holds each chat and execute_tool; the model call and the tool carry their own span as traceparent', async () => {
    const s = await setup([call('show_trace', {}), submit('done')], {
      HOLT_LLM_TOOLS: JSON.stringify([traceTool]),
    });
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');

    const turn = only('invoke_agent coder');
    expect(turn.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'coder',
      'holt.claim.id': r.claim.id,
      'holt.turn.outcome': 'result',
    });
    const chats = named('chat ');
    expect(chats.map((c) => c.name)).toEqual(['chat scripted', 'chat scripted']);
    const tool = only('execute_tool show_trace');
    const submitted = only('execute_tool submit_result');
    for (const child of [...chats, tool, submitted]) {
      expect(child.spanContext().traceId).toBe(turn.spanContext().traceId);
      expect(child.parentSpanContext?.spanId, child.name).toBe(turn.spanContext().spanId);
    }
    expect(chats[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'scripted',
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.usage.output_tokens': 20,
      'server.address': '127.0.0.1',
    });
    expect(chats[0]!.attributes['gen_ai.response.finish_reasons']).toEqual(['tool_calls']);
    expect(tool.attributes).toMatchObject({
      'gen_ai.tool.name': 'show_trace',
      'gen_ai.tool.type': 'function',
    });

    // Across the process edges: the tool read its span's context, the model server got the call's.
    expect(lastTool(1)).toContain(`tp=${tp(tool)}`);
    expect(stores.llm.requests.map((q) => q.headers.traceparent)).toEqual(chats.map(tp));

    // Content is off by default; no attribute carries the API key.
    expect(chats[0]!.attributes['gen_ai.input.messages']).toBeUndefined();
    const everything = JSON.stringify(spans.getFinishedSpans().map((x) => x.attributes));
    expect(everything).not.toContain('sk-unit-test-key-000');
  });

  it('content on spans only when asked, and capped', async () => {
    const s = await setup([submit('the result payload')], { HOLT_TRACE_CONTENT_CHARS: '40' });
    expect((await grantAndRun(s)).outcome).toBe('success');
    const chat = only('chat scripted');
    const input = String(chat.attributes['gen_ai.input.messages']);
    expect(input).toMatch(/^\[\{"role":"system".{0,40}…\[truncated\]$/);
    expect(String(chat.attributes['gen_ai.output.messages'])).toMatch(
      /^\{"content":"","tool_calls".{0,40}…\[truncated\]$/,
    );
  });
});
