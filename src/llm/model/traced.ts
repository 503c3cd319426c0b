import { contentAttribute, GEN_AI, inSpan, SpanKind } from '../../telemetry/spans.ts';
import { classOf } from './errors.ts';
import type { ChatOptions, ChatReply, ChatRequest, ModelClient } from './model.ts';

export interface TracedModelOptions {
  model: string;
  baseUrl?: string;
  /** Messages on the span: 0 = never (the default), else capped at this many characters. */
  contentChars: number;
}

/**
 * A `chat {model}` client span around each model call (GenAI semantic conventions): the model, the
 * server, token usage, finish reason and, on failure, the error class. The messages it sees are the
 * scrubbed ones the model is sent; they go on the span only when asked. Inside the span the HTTP call
 * carries the span's `traceparent` (model.ts), so a gateway that traces continues it.
 */
export class TracedModel implements ModelClient {
  readonly #inner: ModelClient;
  readonly #o: TracedModelOptions;
  readonly #server: Record<string, string | number>;

  constructor(inner: ModelClient, o: TracedModelOptions) {
    this.#inner = inner;
    this.#o = o;
    const u = o.baseUrl ? URL.parse(o.baseUrl) : null;
    this.#server = u
      ? {
          'server.address': u.hostname,
          'server.port': Number(u.port) || (u.protocol === 'https:' ? 443 : 80),
        }
      : { 'server.address': 'api.openai.com', 'server.port': 443 };
  }

  chat(req: ChatRequest, opts?: ChatOptions): Promise<ChatReply> {
    const { model, contentChars } = this.#o;
    return inSpan(
      `chat ${model}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [GEN_AI.operation]: 'chat',
          [GEN_AI.provider]: 'openai',
          [GEN_AI.requestModel]: model,
          ...this.#server,
        },
        classify: classOf,
      },
      async (span) => {
        const input = contentAttribute(req.messages, contentChars);
        if (input !== undefined) span.setAttribute(GEN_AI.inputMessages, input);
        const r = await this.#inner.chat(req, opts);
        span.setAttributes({
          [GEN_AI.inputTokens]: r.usage.promptTokens,
          [GEN_AI.outputTokens]: r.usage.completionTokens,
          [GEN_AI.finishReasons]: r.finishReason ? [r.finishReason] : [],
        });
        const output = contentAttribute({ content: r.content, tool_calls: r.toolCalls }, contentChars);
        if (output !== undefined) span.setAttribute(GEN_AI.outputMessages, output);
        return r;
      },
    );
  }
}
