import { APIError, OpenAI } from 'openai';
import { z } from 'zod';
import { carrierOf, traceFieldsOf } from '../telemetry/carrier.ts';

/**
 * Embeddings from an OpenAI-compatible `/embeddings` endpoint (the agent's model server, or one of its
 * own). The dimension is whatever the model returns; every vector of one call must share it. A reply
 * that does not parse, or a vector that is not finite, is an error, never a silent zero.
 */

export interface Embedder {
  /** The model's name: vectors of different models are never compared. */
  readonly model: string;
  /** One vector per text, in order. */
  embed(texts: readonly string[], signal?: AbortSignal): Promise<number[][]>;
}

export interface EmbedderOptions {
  baseUrl: string;
  model: string;
  /** The endpoint's key, read apart from the settings (never stored, never logged). */
  apiKey?: string;
  timeoutMs?: number;
  /** Texts longer than this are cut before they are sent (a model has an input limit). */
  maxChars?: number;
}

const Reply = z.object({
  data: z
    .array(z.object({ index: z.number().int().min(0), embedding: z.array(z.number().finite()).min(1) }))
    .min(1),
});

export class EmbeddingError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.name = 'EmbeddingError';
    this.status = status;
  }
}

export class OpenAiEmbedder implements Embedder {
  readonly model: string;
  readonly #client: OpenAI;
  readonly #maxChars: number;

  constructor(o: EmbedderOptions) {
    this.model = o.model;
    this.#maxChars = o.maxChars ?? 8_000;
    this.#client = new OpenAI({
      apiKey: o.apiKey || 'not-needed',
      baseURL: o.baseUrl,
      timeout: o.timeoutMs ?? 30_000,
      maxRetries: 2,
      logLevel: 'off',
    });
  }

  async embed(texts: readonly string[], signal?: AbortSignal): Promise<number[][]> {
    if (!texts.length) return [];
    let raw: unknown;
    try {
      raw = await this.#client.embeddings.create(
        {
          model: this.model,
          input: texts.map((t) => t.slice(0, this.#maxChars)),
          encoding_format: 'float',
        },
        { signal, headers: traceFieldsOf(carrierOf() ?? {}) },
      );
    } catch (e) {
      if (e instanceof APIError)
        throw new EmbeddingError(`embeddings endpoint answered ${e.status ?? 'no status'}`, e.status);
      throw new EmbeddingError(`embeddings endpoint unreachable: ${(e as Error).message}`);
    }
    const r = Reply.safeParse(raw);
    if (!r.success)
      throw new EmbeddingError(`malformed embeddings reply: ${r.error.issues[0]?.message ?? 'unknown'}`);
    const byIndex = [...r.data.data].sort((a, b) => a.index - b.index);
    if (byIndex.length !== texts.length || byIndex.some((d, i) => d.index !== i))
      throw new EmbeddingError(`embeddings reply has ${byIndex.length} vectors for ${texts.length} texts`);
    const dim = byIndex[0]!.embedding.length;
    if (byIndex.some((d) => d.embedding.length !== dim))
      throw new EmbeddingError('embeddings reply mixes dimensions');
    return byIndex.map((d) => d.embedding);
  }
}
