import type { IncomingMessage } from 'node:http';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { A2ATasks } from '../a2a/store.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { getAgents } from '../blackboard/registry.ts';
import { parseEnv } from '../common/config.ts';
import type { Logger } from '../common/logger.ts';
import { VERSION } from '../common/version.ts';
import { createConsole } from '../console/server.ts';
import { tokenSignIn } from '../console/session.ts';
import { CONSOLE_BASE, startIngressServer } from '../ingress/server.ts';
import { tokenFileSource } from '../ingress/tokens.ts';
import { ReplyStore } from '../life/replies.ts';
import { LifeStore } from '../life/store.ts';
import { LifeTasks } from '../life/tasks.ts';
import { DEFAULT_DELIVERY, DeliveryLoop } from './delivery.ts';
import type { OrchestratorInbox } from './inbox.ts';

export const IngressEnv = z.object({
  /** The ingress port (0: no ingress). The operator sets it when an Agent asks for ingress. */
  HOLT_INGRESS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  HOLT_INGRESS_TOKENS_FILE: z.string().min(1).default('/etc/holt/ingress/tokens.json'),
  // What a caller may hold before its token is checked (src/ingress/guard.ts), and the agents' backlog.
  HOLT_INGRESS_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(1024),
  HOLT_INGRESS_MAX_PER_SOURCE: z.coerce.number().int().min(1).max(1_000_000).default(128),
  HOLT_INGRESS_AUTH_FAILURES: z.coerce.number().int().min(1).max(1_000_000).default(20),
  HOLT_INGRESS_AUTH_WINDOW_MS: z.coerce.number().int().min(1000).default(60_000),
  HOLT_INGRESS_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  HOLT_INGRESS_BODY_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  HOLT_INGRESS_MAX_UNDELIVERED: z.coerce.number().int().min(1).max(10_000_000).default(1000),
  /** Idempotency keys (hashes) are kept this long: a replay within it is a duplicate, however late. */
  HOLT_INGRESS_IDEMPOTENCY_DAYS: z.coerce.number().min(1).default(365),
  // Delivery of outcomes to callbacks (orchestrator/delivery.ts).
  HOLT_DELIVERY_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(DEFAULT_DELIVERY.maxAttempts),
  HOLT_DELIVERY_RETRY_BASE_MS: z.coerce.number().int().min(10).default(DEFAULT_DELIVERY.retryBaseMs),
  HOLT_DELIVERY_MAX_BACKOFF_MS: z.coerce.number().int().min(10).default(DEFAULT_DELIVERY.maxBackoffMs),
  HOLT_DELIVERY_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(DEFAULT_DELIVERY.timeoutMs),
  HOLT_DELIVERY_POLL_MS: z.coerce.number().int().min(50).default(DEFAULT_DELIVERY.pollMs),
  // A2A (src/a2a): the URL its cards name (else the request's Host), a blocking send's longest wait,
  // a stream's longest life, and how often a followed task is read at first.
  HOLT_A2A_PUBLIC_URL: z.url().optional(),
  HOLT_A2A_BLOCK_MS: z.coerce.number().int().min(0).max(600_000).default(60_000),
  HOLT_A2A_STREAM_MS: z.coerce.number().int().min(1000).max(86_400_000).default(1_800_000),
  HOLT_A2A_POLL_MS: z.coerce.number().int().min(20).max(10_000).default(250),
  // The console (src/console) at /console of the ingress port, signed in with the file's console tokens.
  HOLT_CONSOLE: z.enum(['true', 'false']).default('false'),
  HOLT_CONSOLE_TRACES_URL: z.url().optional(),
  /** How often the console reads the agents and living agents again (the bus's events also do). */
  HOLT_CONSOLE_POLL_MS: z.coerce.number().int().min(200).max(3_600_000).default(3_000),
});

/** How long the ingress's idempotency keys are kept (for retention). */
export const ingressKeysKeptMs = (env: NodeJS.ProcessEnv) =>
  parseEnv(IngressEnv, env).HOLT_INGRESS_IDEMPOTENCY_DAYS * 86_400_000;

/**
 * The orchestrator's external ingress for living agents (src/ingress), when HOLT_INGRESS_PORT is set
 * and the inbox (Postgres, NATS) is there: messages and wake hints queued in Postgres, then a doorbell.
 * Only the leader serves: a standby answers 503 with Retry-After to everything, before any token is
 * read, so its rate and failed-authentication state never adds to the leader's (the Service sends
 * callers to every ready replica; readiness cannot follow the lease without stalling rollouts).
 */
export async function startOrchestratorIngress(o: {
  instance: string;
  env: NodeJS.ProcessEnv;
  bb: Blackboard;
  inbox: OrchestratorInbox;
  log: Logger;
  isLeader: () => boolean;
  registry?: Registry;
}): Promise<{ port: number; close(): Promise<void> } | undefined> {
  const env = parseEnv(IngressEnv, o.env);
  if (!env.HOLT_INGRESS_PORT) return undefined;
  const store = o.inbox.store;
  if (!store) {
    o.log.warn(
      { event_type: 'ingress_disabled', reason: 'no DATABASE_URL/NATS_URL' },
      'no ingress without the inbox',
    );
    return undefined;
  }
  const log = o.log.child({ component: 'ingress' });
  const tokenFile = tokenFileSource(env.HOLT_INGRESS_TOKENS_FILE, (e) =>
    log.error(
      { event_type: 'ingress_tokens_unreadable', error: e.message },
      'token file unreadable; keeping the last good one',
    ),
  );
  const tokens = () => tokenFile().tokens;
  const replies = new ReplyStore(store.pool);
  const lifeTasks = new LifeTasks(store.pool);
  const delivery = new DeliveryLoop({
    replies,
    tokens,
    log: o.log.child({ component: 'delivery' }),
    serving: o.isLeader,
    publish: (e) => o.inbox.deliveryEvent(e),
    ...(o.inbox.request ? { request: o.inbox.request } : {}),
    settings: {
      maxAttempts: env.HOLT_DELIVERY_MAX_ATTEMPTS,
      retryBaseMs: env.HOLT_DELIVERY_RETRY_BASE_MS,
      maxBackoffMs: env.HOLT_DELIVERY_MAX_BACKOFF_MS,
      timeoutMs: env.HOLT_DELIVERY_TIMEOUT_MS,
      pollMs: env.HOLT_DELIVERY_POLL_MS,
    },
  });
  const srv = await startIngressServer({
    instance: o.instance,
    port: env.HOLT_INGRESS_PORT,
    life: new LifeStore(store.pool),
    tasks: lifeTasks,
    tokens,
    a2a: {
      tasks: new A2ATasks(store.pool, replies),
      lifeTasks,
      describe: async (role) => (await getAgents(o.bb)).agents.find((a) => a.role === role)?.a2a,
      ...(env.HOLT_A2A_PUBLIC_URL ? { publicUrl: env.HOLT_A2A_PUBLIC_URL } : {}),
      version: VERSION,
      blockMs: env.HOLT_A2A_BLOCK_MS,
      streamMs: env.HOLT_A2A_STREAM_MS,
      pollMs: env.HOLT_A2A_POLL_MS,
    },
    knows: async (role) => (await getAgents(o.bb)).agents.some((a) => a.role === role),
    ring: (role) => o.inbox.wakeLife(role),
    log,
    serving: o.isLeader,
    limits: {
      maxConnections: env.HOLT_INGRESS_MAX_CONNECTIONS,
      maxPerSource: env.HOLT_INGRESS_MAX_PER_SOURCE,
      maxAuthFailures: env.HOLT_INGRESS_AUTH_FAILURES,
      failureWindowMs: env.HOLT_INGRESS_AUTH_WINDOW_MS,
      headersTimeoutMs: env.HOLT_INGRESS_HEADERS_TIMEOUT_MS,
      bodyTimeoutMs: env.HOLT_INGRESS_BODY_TIMEOUT_MS,
      maxUndelivered: env.HOLT_INGRESS_MAX_UNDELIVERED,
    },
    ...(o.registry ? { registry: o.registry } : {}),
    ...(env.HOLT_CONSOLE === 'true'
      ? {
          console: ({ failed }: { failed: (req: IncomingMessage) => void }) =>
            createConsole({
              bb: o.bb,
              pool: store.pool,
              log: o.log.child({ component: 'console' }),
              ...(env.HOLT_CONSOLE_TRACES_URL ? { tracesUrl: env.HOLT_CONSOLE_TRACES_URL } : {}),
              agentsPollMs: env.HOLT_CONSOLE_POLL_MS,
              ...(o.inbox.watchLife ? { lifeChanges: o.inbox.watchLife } : {}),
              gate: tokenSignIn({
                base: CONSOLE_BASE,
                tokens: () => tokenFile().console,
                failed,
                signedIn: (t) =>
                  log.info(
                    { event_type: 'console_signed_in', token_name: t.name, access: t.access },
                    `console: signed in with token ${t.name}`,
                  ),
              }),
            }),
        }
      : {}),
  });
  log.info(
    { event_type: 'ingress_started', port: srv.port, console: env.HOLT_CONSOLE === 'true' },
    `ingress on :${srv.port}`,
  );
  delivery.start();
  return {
    port: srv.port,
    close: async () => {
      await delivery.stop();
      await srv.close();
    },
  };
}
