// The set-up shared by the LLM plugin tests: real Redis, Postgres and NATS plus the scripted model
// server, a temp workspace, a pg pool and a NATS connection; and the pup env of an LLM agent.
import { randomUUID } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { afterAll, beforeAll } from 'vitest';
import type { CardInfo } from '../../src/a2a/card.ts';
import { A2ATasks } from '../../src/a2a/store.ts';
import type { TokenEntry } from '../../src/access/tokens.ts';
import { Blackboard } from '../../src/blackboard/client.ts';
import { lifeWakeSubject } from '../../src/bus/subjects.ts';
import { silentLogger } from '../../src/common/logger.ts';
import { createPool } from '../../src/common/pg.ts';
import { type IngressServer, startIngressServer } from '../../src/ingress/server.ts';
import { labelsOf } from '../../src/life/labels.ts';
import { ReplyStore } from '../../src/life/replies.ts';
import { LifeStore } from '../../src/life/store.ts';
import { LifeTasks } from '../../src/life/tasks.ts';
import { type LlmPlugin, startLlmPlugin } from '../../src/llm/plugin.ts';
import { config } from '../../src/pup/testkit.ts';
import { tracingSettings } from '../../src/telemetry/settings.ts';
import { startTracing } from '../../src/telemetry/tracing.ts';
import { type LlmServer, startLlmServer } from './llm.ts';
import { type NatsServer, startNats } from './nats.ts';
import { type PostgresServer, startPostgres } from './postgres.ts';
import { type RedisServer, startRedis } from './redis.ts';
import { makeTempDir, removeDir } from './tmp.ts';

export interface Servers {
  redis: RedisServer;
  postgres: PostgresServer;
  nats: NatsServer;
  llm: LlmServer;
  stop(): Promise<void>;
}

/** Redis, Postgres, NATS and the scripted model server, started together. */
export async function startServers(): Promise<Servers> {
  const [redis, postgres, nats, llm] = await Promise.all([
    startRedis(),
    startPostgres(),
    startNats(),
    startLlmServer(),
  ]);
  const stop = async () => {
    await Promise.all([redis.stop(), postgres.stop(), nats.stop(), llm.close()]);
  };
  return { redis, postgres, nats, llm, stop };
}

export interface RuntimeStores extends Servers {
  ws: string;
  pool: pg.Pool;
  nc: NatsConnection;
  /** Run first by `stop`, last pushed first. */
  cleanup: (() => Promise<void>)[];
}

/** The servers, a temp workspace named `wsName`, a pg pool of `poolMax` and a NATS connection. */
async function startRuntimeStores(wsName: string, poolMax = 3): Promise<RuntimeStores> {
  const servers = await startServers();
  const ws = makeTempDir(wsName);
  const pool = createPool(servers.postgres.url, { max: poolMax });
  pool.on('connect', (c) => c.on('error', () => undefined));
  const nc = await connect({ servers: servers.nats.url });
  const cleanup: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
    await nc.close();
    await pool.end();
    await servers.stop();
    removeDir(ws);
  };
  return { ...servers, ws, pool, nc, cleanup, stop };
}

/** The stores of a test file: started in its beforeAll (filled in then), stopped in its afterAll. */
export function useRuntimeStores(wsName: string, poolMax = 3): RuntimeStores {
  const stores = {} as RuntimeStores;
  beforeAll(async () => {
    Object.assign(stores, await startRuntimeStores(wsName, poolMax));
  });
  afterAll(() => stores.stop?.());
  return stores;
}

/** The pup env of the LLM agent `instance` on these stores; `overrides` win. */
export function llmPupEnv(
  s: RuntimeStores,
  instance: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    REDIS_URL: s.redis.url,
    HOLT_INSTANCE_NAME: instance,
    HOLT_WORKSPACE: s.ws,
    HOLT_AGENT_COMMAND: '',
    HOLT_LLM_ENABLED: 'true',
    HOLT_LLM_BASE_URL: s.llm.url,
    HOLT_LLM_MODEL: 'scripted',
    HOLT_LLM_MAX_RETRIES: '1',
    DATABASE_URL: s.postgres.url,
    NATS_URL: s.nats.url,
    ...overrides,
  };
}

/** The LLM plugin of a pup with `env`; closed (once) by `stop` or by the stores' cleanup. */
export async function startPupRuntime(
  s: RuntimeStores,
  env: Record<string, string>,
  registry?: Registry,
  /** The pup's own environment beyond its config (a remote agent's token: never a tool's). */
  pupOnly: Record<string, string> = {},
): Promise<{ bb: Blackboard; rt: LlmPlugin; stop: () => Promise<void> }> {
  // As the pup program does (src/agent/main.ts): with no endpoint this only sets the context manager,
  // so trace context flows from a turn to its model calls and tools as it does in a real pup.
  startTracing('pup', tracingSettings({}), silentLogger());
  const cfg = config(env);
  const bb = Blackboard.connect(s.redis.url, cfg.instance);
  const rt = await startLlmPlugin(
    { ...cfg, llm: cfg.llm! },
    bb,
    silentLogger(),
    {
      HOLT_LLM_API_KEY: 'sk-unit-test-key-000',
      ...pupOnly,
      ...(env.HOLT_TRACE_CONTENT_CHARS ? { HOLT_TRACE_CONTENT_CHARS: env.HOLT_TRACE_CONTENT_CHARS } : {}),
    },
    registry,
  );
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await rt.close();
    await bb.close();
  };
  s.cleanup.push(stop);
  return { bb, rt, stop };
}

/**
 * A message for the living agent `role` of `instance`, as the ingress queues it (labels of `origin`,
 * admitted by `admission`), and its doorbell rung.
 */
export async function sendLifeMessage(
  s: RuntimeStores,
  instance: string,
  body: string,
  o: { role?: string; origin?: 'operator' | 'webhook'; admission?: string } = {},
): Promise<void> {
  const role = o.role ?? 'coder';
  const origin = o.origin ?? 'webhook';
  await new LifeStore(s.pool).enqueue({
    instance,
    role,
    key: randomUUID(),
    kind: 'message',
    body,
    labels: labelsOf(
      origin,
      'message',
      `POST /v1/agents/${role}/messages`,
      o.admission ?? `token t-${origin}`,
    ),
  });
  s.nc.publish(lifeWakeSubject(instance, role));
}

/**
 * The ingress of `instance` on these stores, as the orchestrator serves it (its token file `tokens`),
 * ringing the living agent's doorbell on NATS; its agent is `coder`.
 */
export function startLifeIngress(
  s: RuntimeStores,
  instance: string,
  tokens: () => TokenEntry[],
  /** Serve the agent over A2A with this card (src/a2a); null: A2A served, but not for this agent. */
  a2a?: CardInfo | null,
  a2aOptions: { blockMs?: number } = {},
): Promise<IngressServer> {
  const lifeTasks = new LifeTasks(s.pool);
  return startIngressServer({
    ...(a2a !== undefined
      ? {
          a2a: {
            tasks: new A2ATasks(s.pool, new ReplyStore(s.pool)),
            lifeTasks,
            describe: async (role: string) => (role === 'coder' && a2a ? a2a : undefined),
            version: '0.0.0-test',
            blockMs: a2aOptions.blockMs ?? 90_000,
            pollMs: 100,
            streamMs: 60_000,
          },
        }
      : {}),
    instance,
    port: 0,
    host: '127.0.0.1',
    life: new LifeStore(s.pool),
    tasks: lifeTasks,
    tokens,
    knows: async (role) => role === 'coder',
    ring: (role) => s.nc.publish(lifeWakeSubject(instance, role)),
    log: silentLogger(),
  });
}
