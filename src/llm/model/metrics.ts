import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { costOf, type Prices } from './budget.ts';
import { classOf } from './errors.ts';
import type { ChatOptions, ChatReply, ChatRequest, ModelClient } from './model.ts';

/**
 * Why a model call failed, as an alert can name it (never the message: it may hold anything): its
 * class (src/blackboard/error-class.ts), or `aborted` for a call the pup itself cut short.
 */
export function errorClass(e: unknown): string {
  if (e instanceof Error && /aborted/.test(e.message)) return 'aborted';
  return classOf(e);
}

/** The LLM metrics of one pup (its registry carries the role): tokens, cost, latency and errors. */
export class LlmMetrics {
  readonly tokens: Counter<'direction'>;
  readonly cost: Counter;
  readonly latency: Histogram<'outcome'>;
  readonly errors: Counter<'class'>;
  readonly paused: Gauge;
  /** A living agent's tool answers and turn byte cap (src/life/loop.ts LifeCounters). */
  readonly life: { toolAnswer(outcome: string): void; deferred(n: number): void; itemRefused(): void };
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
      help: 'Model calls that failed for good, by class (config, auth, quota, transient, model_output, aborted)',
      labelNames: ['class'],
      registers,
    });
    const answers = new Counter({
      name: 'holt_life_tool_answers_total',
      help: "A living agent's asynchronous tool answers by outcome: recorded, ignored (bound to no waiting call of that tool), invalid",
      labelNames: ['outcome'],
      registers,
    });
    const deferred = new Counter({
      name: 'holt_life_messages_deferred_total',
      help: "Messages a life turn's byte cap (HOLT_LIFE_TURN_BYTES) left queued for a later turn",
      registers,
    });
    const refused = new Counter({
      name: 'holt_life_work_items_refused_total',
      help: 'work_create calls refused because the agent has its most open work items (HOLT_LIFE_MAX_OPEN_ITEMS)',
      registers,
    });
    this.life = {
      toolAnswer: (outcome) => answers.inc({ outcome }),
      deferred: (n) => deferred.inc(n),
      itemRefused: () => refused.inc(),
    };
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
