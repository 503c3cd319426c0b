import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI, { APIConnectionError, APIError } from 'openai';
import { z } from 'zod';
import type { ErrorClass } from '../../blackboard/error-class.ts';
import { backoffDelay } from '../../common/backoff.ts';
import { carrierOf, traceFieldsOf } from '../../telemetry/carrier.ts';
import { ClassifiedError, classifyModelFailure, isRetryableClass } from './errors.ts';

/** The chat messages the loop keeps (OpenAI's wire shape, reduced to what we use). */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; tool_calls?: ToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ToolSpec {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface ChatRequest {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  /** Ask for a JSON object reply (bids, plans). */
  json?: boolean;
  stream?: boolean;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface ChatReply {
  content: string;
  toolCalls: ToolCall[];
  usage: Usage;
  finishReason: string | null;
}

export interface ChatOptions {
  signal?: AbortSignal;
  /** Streamed text as it arrives (lossy consumers only: never a trigger). */
  onChunk?: (text: string) => void;
  /** Each failed attempt that will be retried. */
  onRetry?: (error: string, attempt: number, delayMs: number) => void;
}

export interface ModelClient {
  chat(req: ChatRequest, opts?: ChatOptions): Promise<ChatReply>;
}

/**
 * A model call that failed for good (after retries, or not retryable), with its class (errors.ts). The
 * message never holds the key.
 */
export class ModelError extends ClassifiedError {
  readonly retryable: boolean;
  readonly status: number | undefined;
  constructor(message: string, errorClass: ErrorClass, status?: number) {
    super(message, errorClass);
    this.name = 'ModelError';
    this.retryable = isRetryableClass(errorClass);
    this.status = status;
  }
}

// Every reply is parsed: a server that sends something else is an error, never an exception deep inside.
const UsageWire = z
  .object({
    prompt_tokens: z.number().default(0),
    completion_tokens: z.number().default(0),
    total_tokens: z.number().optional(),
  })
  .nullish();
const ToolCallWire = z.object({
  id: z.string().min(1),
  type: z.literal('function').default('function'),
  function: z.object({ name: z.string().min(1), arguments: z.string().default('') }),
});
const CompletionWire = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({ content: z.string().nullish(), tool_calls: z.array(ToolCallWire).nullish() }),
        finish_reason: z.string().nullish(),
      }),
    )
    .min(1),
  usage: UsageWire,
});
const ChunkWire = z.object({
  choices: z
    .array(
      z.object({
        delta: z
          .object({
            content: z.string().nullish(),
            tool_calls: z
              .array(
                z.object({
                  index: z.number().int().nonnegative(),
                  id: z.string().nullish(),
                  function: z
                    .object({ name: z.string().nullish(), arguments: z.string().nullish() })
                    .nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .default([]),
  usage: UsageWire,
});

function usageOf(u: z.infer<typeof UsageWire>): Usage {
  const p = u?.prompt_tokens ?? 0;
  const c = u?.completion_tokens ?? 0;
  return { promptTokens: p, completionTokens: c, totalTokens: u?.total_tokens ?? p + c };
}

/**
 * The class of a failed attempt (errors.ts): network errors, timeouts, 408/409/425, rate limits and 5xx
 * are transient and worth another try; a refused key, a spent quota or a request that cannot succeed as
 * configured are not.
 */
export function classifyAttempt(e: unknown): ErrorClass {
  if (e instanceof ClassifiedError) return e.errorClass;
  if (e instanceof APIConnectionError) return 'transient';
  if (e instanceof APIError)
    return classifyModelFailure({ status: e.status, code: e.code, message: e.message });
  return 'transient'; // malformed replies and unknown failures: another attempt is cheap
}

export const isRetryable = (e: unknown): boolean => isRetryableClass(classifyAttempt(e));

/** The longest wait a server's Retry-After may impose; past it the budget's pause takes over. */
export const MAX_RETRY_AFTER_MS = 60_000;

/**
 * How long the server asked us to wait before the next attempt: OpenAI's `retry-after-ms`, else
 * `Retry-After` in seconds or as an HTTP date; capped at MAX_RETRY_AFTER_MS; undefined when it did not say.
 */
export function retryAfterMs(headers: Headers | undefined, nowMs = Date.now()): number | undefined {
  const ms = Number.parseFloat(headers?.get('retry-after-ms') ?? '');
  const raw = headers?.get('retry-after')?.trim();
  let wait: number | undefined = Number.isFinite(ms) ? ms : undefined;
  if (wait === undefined && raw) {
    const seconds = Number(raw);
    wait = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(raw) - nowMs;
  }
  if (wait === undefined || !Number.isFinite(wait)) return undefined;
  return Math.min(Math.max(0, wait), MAX_RETRY_AFTER_MS);
}

function describe(e: unknown): string {
  if (e instanceof APIError && e.status) return `HTTP ${e.status}: ${e.message.slice(0, 300)}`;
  return e instanceof Error ? e.message.slice(0, 300) : String(e);
}

export interface OpenAiModelOptions {
  baseUrl?: string;
  apiKey?: string;
  model: string;
  temperature?: number;
  maxTokens?: number;
  timeoutMs: number;
  maxRetries: number;
  /** Backoff base between attempts (ms). */
  retryBaseMs?: number;
}

/**
 * The official `openai` client against any OpenAI-compatible server. Its own retries are off: ours
 * cover streamed replies too and report each attempt; after `maxRetries` the call fails with a ModelError.
 */
export class OpenAiModel implements ModelClient {
  private readonly client: OpenAI;
  private readonly opts: OpenAiModelOptions;
  constructor(o: OpenAiModelOptions) {
    this.opts = o;
    this.client = new OpenAI({
      apiKey: o.apiKey || 'not-needed',
      baseURL: o.baseUrl,
      timeout: o.timeoutMs,
      maxRetries: 0,
      logLevel: 'off',
    });
  }

  async chat(req: ChatRequest, opts: ChatOptions = {}): Promise<ChatReply> {
    let attempt = 0;
    for (;;) {
      try {
        return req.stream ? await this.streamed(req, opts) : await this.plain(req, opts);
      } catch (e) {
        if (opts.signal?.aborted) throw new ModelError('model call aborted', 'transient');
        const cls = classifyAttempt(e);
        const status = e instanceof APIError ? e.status : undefined;
        if (!isRetryableClass(cls) || attempt >= this.opts.maxRetries)
          throw new ModelError(
            `model call failed after ${attempt + 1} attempt(s): ${describe(e)}`,
            cls,
            status,
          );
        attempt++;
        const backoff = backoffDelay(attempt, this.opts.retryBaseMs ?? 500, 10_000);
        const asked = e instanceof APIError ? retryAfterMs(e.headers) : undefined;
        const d = Math.max(backoff, asked ?? 0);
        opts.onRetry?.(describe(e), attempt, d);
        await sleep(d, undefined, { signal: opts.signal }).catch(() => undefined);
      }
    }
  }

  private body(req: ChatRequest) {
    return {
      model: this.opts.model,
      messages: req.messages,
      ...(req.tools?.length ? { tools: req.tools } : {}),
      ...(this.opts.temperature !== undefined ? { temperature: this.opts.temperature } : {}),
      ...(this.opts.maxTokens !== undefined ? { max_tokens: this.opts.maxTokens } : {}),
      ...(req.json ? { response_format: { type: 'json_object' as const } } : {}),
    };
  }

  private async plain(req: ChatRequest, opts: ChatOptions): Promise<ChatReply> {
    const raw: unknown = await this.client.chat.completions.create(
      { ...this.body(req), stream: false },
      { signal: opts.signal, headers: traceHeaders() },
    );
    const r = CompletionWire.safeParse(raw);
    if (!r.success)
      throw new ModelError(
        `malformed reply from the model server: ${r.error.issues[0]?.message}`,
        'transient',
      );
    const choice = r.data.choices[0]!;
    return {
      content: choice.message.content ?? '',
      toolCalls: (choice.message.tool_calls ?? []).map((t) => ({ ...t, type: 'function' as const })),
      usage: usageOf(r.data.usage),
      finishReason: choice.finish_reason ?? null,
    };
  }

  private async streamed(req: ChatRequest, opts: ChatOptions): Promise<ChatReply> {
    const stream = await this.client.chat.completions.create(
      { ...this.body(req), stream: true, stream_options: { include_usage: true } },
      { signal: opts.signal, headers: traceHeaders() },
    );
    let content = '';
    let finishReason: string | null = null;
    let usage: Usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
    const calls = new Map<number, { id: string; name: string; args: string }>();
    for await (const raw of stream as AsyncIterable<unknown>) {
      const r = ChunkWire.safeParse(raw);
      if (!r.success)
        throw new ModelError(`malformed stream chunk: ${r.error.issues[0]?.message}`, 'transient');
      if (r.data.usage) usage = usageOf(r.data.usage);
      for (const c of r.data.choices) {
        if (c.finish_reason) finishReason = c.finish_reason;
        const d = c.delta;
        if (d?.content) {
          content += d.content;
          opts.onChunk?.(d.content);
        }
        for (const t of d?.tool_calls ?? []) {
          const cur = calls.get(t.index) ?? { id: '', name: '', args: '' };
          if (t.id) cur.id = t.id;
          if (t.function?.name) cur.name += t.function.name;
          if (t.function?.arguments) cur.args += t.function.arguments;
          calls.set(t.index, cur);
        }
      }
    }
    const toolCalls = [...calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([i, c]) => ({
        id: c.id || `call_${i}`,
        type: 'function' as const,
        function: { name: c.name, arguments: c.args },
      }));
    return { content, toolCalls, usage, finishReason };
  }
}

/** The active span's W3C headers (the `chat` span of traced.ts), so a model gateway can continue the trace. */
const traceHeaders = (): Record<string, string> => traceFieldsOf(carrierOf() ?? {});
