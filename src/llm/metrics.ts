import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { costOf, type Prices } from './budget.ts';
import { type ChatOptions, type ChatReply, type ChatRequest, type ModelClient, ModelError } from './model.ts';

/** Why a model call failed, in a few classes an alert can name (never the message: it may hold anything). */
export function errorClass(e: unknown): string {
  if (e instanceof ModelError) {
    const s = e.status;
    if (s === 429) return 'rate_limited';
    if (s === 401 || s === 403) return 'auth';
    if (s !== undefined && s >= 500) return 'server';
    if (s !== undefined && s >= 400) return 'bad_request';
    if (/aborted/.test(e.message)) return 'aborted';
    if (/timed? ?out/i.test(e.message)) return 'timeout';
    if (/invalid|parse|schema/i.test(e.message)) return 'invalid_reply';
    return e.retryable ? 'network' : 'other';
  }
  return 'other';
}

/** The LLM metrics of one pup (its registry carries the role): tokens, cost, latency and errors. */
export class LlmMetrics {
  readonly tokens: Counter<'direction'>;
  readonly cost: Counter;
  readonly latency: Histogram<'outcome'>;
  readonly errors: Counter<'class'>;
  readonly paused: Gauge;
  #pausedReason: () => string | null | undefined = () => null;

  constructor(registry: Registry) {
    const registers = [registry];
    const self = this;
    this.paused = new Gauge({
      name: 'holt_llm_budget_paused',
      help: '1 while the agent is paused by its budget or by errors in a row (holt status says why)',
      registers,
      collect() {
        this.set(self.#pausedReason() ? 1 : 0);
      },
    });
    this.tokens = new Counter({
      name: 'holt_llm_tokens_total',
      help: 'Tokens of model calls, by direction (input: the prompt, output: the completion)',
      labelNames: ['direction'],
      registers,
    });
    this.cost = new Counter({
      name: 'holt_llm_cost_usd_total',
      help: "Cost of model calls in US dollars, at the agent's configured prices",
      registers,
    });
    this.latency = new Histogram({
      name: 'holt_llm_request_duration_seconds',
      help: 'Time per model call, retries included, by outcome (success, error)',
      labelNames: ['outcome'],
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.errors = new Counter({
      name: 'holt_llm_errors_total',
      help: 'Model calls that failed for good, by class (rate_limited, auth, server, bad_request, timeout, network, invalid_reply, aborted, other)',
      labelNames: ['class'],
      registers,
    });
  }

  /** Where the paused gauge reads from (the agent, made after its model client). */
  watchPause(agent: PauseSource): void {
    this.#pausedReason = () => agent.pausedReason();
  }
}

export interface PauseSource {
  pausedReason(): string | null | undefined;
}

/** A model client that measures every call of the one it wraps. */
export class MeteredModel implements ModelClient {
  readonly #inner: ModelClient;
  readonly #m: LlmMetrics;
  readonly #prices: Prices;

  constructor(inner: ModelClient, metrics: LlmMetrics, prices: Prices) {
    this.#inner = inner;
    this.#m = metrics;
    this.#prices = prices;
  }

  async chat(req: ChatRequest, opts?: ChatOptions): Promise<ChatReply> {
    const end = this.#m.latency.startTimer();
    try {
      const r = await this.#inner.chat(req, opts);
      end({ outcome: 'success' });
      this.#m.tokens.inc({ direction: 'input' }, r.usage.promptTokens);
      this.#m.tokens.inc({ direction: 'output' }, r.usage.completionTokens);
      this.#m.cost.inc(costOf(r.usage, this.#prices));
      return r;
    } catch (e) {
      end({ outcome: 'error' });
      this.#m.errors.inc({ class: errorClass(e) });
      throw e;
    }
  }
}
