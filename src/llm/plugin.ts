import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { clearMemoryStatus, writeLifeStatus, writeMemoryStatus } from '../blackboard/agent-status.ts';
import type { Blackboard } from '../blackboard/client.ts';
import type { ErrorClass } from '../blackboard/error-class.ts';
import { mcpStatusKey } from '../blackboard/mcp-status.ts';
import { busProblem, connectBus } from '../bus/connect.ts';
import { type AgentEvents, natsAgentEvents, noAgentEvents, publishLifeEvent } from '../bus/events.ts';
import type { Logger } from '../common/logger.ts';
import { createPool } from '../common/pg.ts';
import { Scrubber } from '../common/secrets.ts';
import { LifeLoop } from '../life/loop.ts';
import { LifeStore } from '../life/store.ts';
import { OpenAiEmbedder } from '../memory/embeddings.ts';
import { MemoryStore as LongMemoryStore } from '../memory/store.ts';
import { decideBid } from '../pup/bid.ts';
import type { PupConfig } from '../pup/config.ts';
import type { ModelPlugin } from '../pup/executor.ts';
import { lifeActorOf } from '../state/ids.ts';
import { ensureSchema } from '../state/migrate.ts';
import { StepStore } from '../state/steps.ts';
import { tracingSettings } from '../telemetry/settings.ts';
import { countByReadiness } from '../work/items.ts';
import { WorkStore } from '../work/store.ts';
import { llmBid, ownQuestionReason } from './bid.ts';
import { apiKeyFrom, type LlmSettings } from './config.ts';
import { LlmExecutor, type LlmExecutorDeps } from './executor.ts';
import { LifeTurns } from './life-turn.ts';
import { McpHub } from './mcp/hub.ts';
import { McpStatusPublisher } from './mcp/status.ts';
import { LlmAgent } from './model/agent.ts';
import { LlmMetrics, MeteredModel } from './model/metrics.ts';
import { OpenAiModel } from './model/model.ts';
import { TracedModel } from './model/traced.ts';
import { LongMemory } from './stores/long-memory.ts';
import { MemoryStore } from './stores/memory-store.ts';
import { PlanStore } from './stores/plan-store.ts';
import { TurnStore } from './stores/turn-store.ts';
import { UsageStore } from './stores/usage-store.ts';

/**
 * What the pup runs for an LLM agent: the executor (LLM turns) and/or the bid decision. `problem` is
 * why it cannot work (its NATS connection closed for good), or null.
 */
export interface LlmPlugin extends ModelPlugin {
  agent: LlmAgent;
  executor?: LlmExecutor;
  /** Its MCP servers, and what publishes their states (absent without MCP servers). */
  mcp?: McpHub;
  mcpStatus?: McpStatusPublisher;
}

/**
 * Composition root of the LLM path. The Postgres schema is checked (migrated if this role may) so a pup
 * never runs against a schema without its tables; NATS is optional (events are lossy anyway).
 */
export async function startLlmPlugin(
  /** `apiKey`: the key as the entry point read it (its variable, or a credential descriptor). */
  cfg: PupConfig & { llm: LlmSettings; apiKey?: string },
  bb: Blackboard,
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
  /** The pup's metrics registry: model calls are measured there (holt_llm_*). */
  registry?: Registry,
  /** Counts each Failure artefact the LLM executor writes, by class. */
  countFailure?: (c: ErrorClass) => void,
): Promise<LlmPlugin> {
  const s = cfg.llm;
  const apiKey = cfg.apiKey ?? apiKeyFrom(env, s);
  // A remote MCP server's header values are credentials of the pup's too: cut out of all it writes.
  const headerSecrets = [
    ...s.mcpServers.flatMap((m) =>
      Object.values(m.headers ?? {}).flatMap((h) => [env[h.env], h.prefix + (env[h.env] ?? '')]),
    ),
    // So is a remote A2A agent's token (an async: a2a tool's).
    ...s.tools.flatMap((t) => (t.a2a?.token ? [env[t.a2a.token.env]] : [])),
  ];
  const scrub = new Scrubber([apiKey, ...cfg.secrets, ...headerSecrets]);
  let pool: pg.Pool | undefined;
  if (s.databaseUrl) {
    await ensureSchema(s.databaseUrl, log);
    // A dropped connection must not crash the pup: the next query reconnects (or fails the step).
    pool = createPool(s.databaseUrl, { max: 4 }, log);
  }
  let nc: NatsConnection | undefined;
  let events: AgentEvents = noAgentEvents;
  if (s.natsUrl && s.execute) {
    try {
      nc = await connectBus(s.natsUrl, `pup-${cfg.instance}-${cfg.role}`);
      events = natsAgentEvents(nc);
    } catch (e) {
      log.warn({ event_type: 'nats_unavailable', error: String(e), effect: 'no step/chunk events' });
    }
  }
  const openai = new OpenAiModel({
    baseUrl: s.baseUrl,
    apiKey,
    model: s.model,
    temperature: s.temperature,
    maxTokens: s.maxTokens,
    timeoutMs: s.timeoutMs,
    maxRetries: s.maxRetries,
    retryBaseMs: Math.max(50, Math.min(500, s.budget.errorBaseMs)),
  });
  const metrics = registry ? new LlmMetrics(registry) : undefined;
  const metered = metrics ? new MeteredModel(openai, metrics, s.prices) : openai;
  const model = new TracedModel(metered, {
    model: s.model,
    baseUrl: s.baseUrl,
    contentChars: tracingSettings(env).contentChars,
  });
  const agent = new LlmAgent({
    instance: cfg.instance,
    role: cfg.role,
    settings: s,
    model,
    usage: pool && new UsageStore(pool),
    redis: bb.redis,
    log,
    scrub,
  });
  metrics?.watchPause(agent);
  await agent.publishStatus();
  // Each server connects on its own, bounded by its timeout: a hung one delays the start by that at most.
  const mcp =
    s.execute && s.mcpServers.length
      ? new McpHub(
          s.mcpServers,
          {
            runner: cfg.runner,
            workspace: cfg.workspace,
            env,
            log: log.child({ mcp: true }),
            scrub,
          },
          registry,
        )
      : undefined;
  // Its servers' states go to the Holt's Redis on each change (the Agent's status.mcpServers, holt status).
  const published =
    mcp &&
    new McpStatusPublisher(
      () => mcp.servers,
      { redis: bb.redis, instance: cfg.instance, role: cfg.role },
      log,
    );
  if (mcp && published) mcp.onChange = () => published.changed();
  else if (s.execute)
    // None now: a report left by an earlier spec would name servers the agent no longer has.
    await bb.redis.del(mcpStatusKey(cfg.instance, cfg.role)).catch(() => undefined);
  await mcp?.start();
  // Its long-term memory, whose counts go to the agent's status hash (the Agent's status.memory).
  const longMemory =
    s.execute && pool && s.longMemory
      ? new LongMemory({
          store: new LongMemoryStore(pool),
          settings: s.longMemory,
          instance: cfg.instance,
          log,
          onCounts: (role, c) =>
            writeMemoryStatus(bb.redis, cfg.instance, role, {
              memories: c.memories,
              memory_recalls: c.recalls,
            }),
          ...(s.longMemory.embeddings?.baseUrl
            ? {
                embedder: new OpenAiEmbedder({
                  baseUrl: s.longMemory.embeddings.baseUrl,
                  model: s.longMemory.embeddings.model,
                  // The model's key goes only to the model's own server, never to another.
                  ...(apiKey && s.longMemory.embeddings.baseUrl === s.baseUrl ? { apiKey } : {}),
                }),
              }
            : {}),
        })
      : undefined;
  if (longMemory) await longMemory.publishCounts(cfg.role);
  else if (!s.longMemory)
    // None now: counts left by an earlier spec would show a memory the agent no longer has.
    await clearMemoryStatus(bb.redis, cfg.instance, cfg.role).catch(() => undefined);
  const deps: LlmExecutorDeps | undefined =
    s.execute && pool
      ? {
          bb,
          cfg,
          settings: s,
          agent,
          store: new TurnStore(pool),
          steps: new StepStore(pool),
          memory: new MemoryStore(pool),
          plans: new PlanStore(pool),
          ...(s.workItems
            ? {
                work: new WorkStore(pool, {
                  maxOpen: s.maxOpenItems,
                  onFull: () => metrics?.life.itemRefused(),
                }),
              }
            : {}),
          scrub,
          env,
          events,
          log,
          owner: `${hostname()}/${process.pid}/${randomUUID()}`,
          countFailure,
          ...(mcp ? { mcp } : {}),
          ...(longMemory ? { longMemory } : {}),
        }
      : undefined;
  const executor = deps && new LlmExecutor(deps);
  const life = deps && pool && s.life ? startLife(deps, pool, nc, metrics) : undefined;
  const script = cfg.bidScript
    ? { argv: cfg.bidScript, cwd: cfg.workspace, timeoutMs: cfg.bidScriptTimeoutMs, runner: cfg.runner }
    : undefined;
  return {
    agent,
    executor,
    ...(mcp && published ? { mcp, mcpStatus: published } : {}),
    async decideBid(target) {
      const paused = agent.pausedReason();
      if (paused) return { bid: 'ignore', source: 'default', fallbackReason: `agent paused: ${paused}` };
      const sources =
        target.structural_type === 'Answer' ? await bb.getArtefacts(target.source_artefacts) : [];
      const own = ownQuestionReason(target, sources, cfg.role);
      if (own) return { bid: 'ignore', source: 'default', fallbackReason: own };
      if (s.bid) return llmBid(agent, target, cfg.promptClaim, log);
      return decideBid(target, cfg.biddingStrategy, script);
    },
    problem: () => busProblem(nc),
    async close() {
      await life?.stop();
      published?.close();
      await mcp?.close();
      await nc?.drain().catch(() => undefined);
      await pool?.end().catch(() => undefined);
    },
  };
}

/**
 * A living agent's loop (src/life) beside its claims: its own turns on messages, timers, waits and
 * runnable work items, in this pup. Recovery runs at once: background commands of a suspended turn
 * are started again, then the first pass resumes, fires and delivers whatever is due.
 */
function startLife(
  deps: LlmExecutorDeps,
  pool: pg.Pool,
  nc: NatsConnection | undefined,
  metrics: LlmMetrics | undefined,
): { stop(): Promise<void> } {
  const { cfg, settings: s, log } = deps;
  const store = new LifeStore(pool, { turnBytes: s.lifeTurnBytes });
  const turns = new LifeTurns(deps, store, nc);
  const loop = new LifeLoop({
    instance: cfg.instance,
    role: cfg.role,
    store,
    steps: deps.steps,
    runTurn: (fence, delivery, signal) => turns.run(fence, delivery, signal),
    renew: (f) => deps.store.renew(f, s.turnLeaseMs),
    release: (f, status) => deps.store.release(f, status),
    paused: () => deps.agent.pausedReason() ?? null,
    nc,
    ...(metrics ? { counters: metrics.life } : {}),
    owner: deps.owner,
    leaseMs: s.turnLeaseMs,
    pollMs: s.lifePollMs,
    log: log.child({ life: true }),
    onDecision: (d, delivery, turnId) => {
      if (!nc || (d.kind !== 'start' && d.kind !== 'tick' && d.kind !== 'resume')) return;
      const conn = nc;
      store
        .messages(delivery?.messageIds ?? [])
        .then((ms) =>
          publishLifeEvent(conn, {
            actor_id: lifeActorOf(cfg.instance, cfg.role),
            role: cfg.role,
            decision: d.kind as 'start' | 'tick' | 'resume',
            why: d.why,
            ...(turnId ? { turn_id: turnId } : {}),
            at_ms: Date.now(),
            delivered: ms.map((m) => ({ id: m.id, kind: m.kind, ...m.labels })),
          }),
        )
        .catch(() => undefined); // lossy, like every event
    },
    onPass: async () => {
      await turns.reap(); // a cancelled background command dies at the pass its doorbell rang
      await status();
    },
  });
  const status = throttled(2_000, async () => {
    const [row, items] = await Promise.all([
      store.lifeRow(cfg.instance, cfg.role),
      deps.work ? deps.work.list(cfg.instance, cfg.role, { all: true, limit: 500 }) : [],
    ]);
    const c = countByReadiness(items, Date.now());
    await writeLifeStatus(deps.bb.redis, cfg.instance, cfg.role, {
      life_state: row.state,
      items_runnable: c.runnable,
      items_waiting: c.waiting,
      items_blocked: c.blocked,
      items_completed: c.completed,
      last_message_at_ms: row.lastMessageMs,
    });
  });
  turns.poke = () => loop.poke();
  // Subscribed first, so the answers to the requests recovery sends again cannot arrive unheard.
  const started = loop
    .start()
    .then(() => store.activeTurn(cfg.instance, cfg.role))
    .then((t) => (t ? turns.recover(t) : 0))
    .then((n) => {
      if (n) log.info({ event_type: 'life_tasks_recovered', count: n }, 'asynchronous tool calls sent again');
    })
    .catch((e: unknown) => log.warn({ event_type: 'life_recover_failed', error: String(e) }));
  log.info({ event_type: 'life_started' }, 'the agent lives: its loop runs beside its claims');
  return {
    async stop() {
      await started;
      await loop.stop();
      await turns.drain();
    },
  };
}

/** `fn` at most once per `ms` (calls in between are dropped: the next one after catches up). */
function throttled(ms: number, fn: () => Promise<void>): () => Promise<void> {
  let last = 0;
  return async () => {
    if (Date.now() - last < ms) return;
    last = Date.now();
    await fn();
  };
}
