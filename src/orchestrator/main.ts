import { fileURLToPath } from 'node:url';
import { collectDefaultMetrics } from 'prom-client';
import { Blackboard } from '../blackboard/client.ts';
import { retry } from '../common/backoff.ts';
import { ConfigError, configErrorExit } from '../common/config.ts';
import { startProbeServer } from '../common/http.ts';
import { createLogger } from '../common/logger.ts';
import { parseProgram } from '../common/program.ts';
import { InboxMetrics } from '../inbox/metrics.ts';
import { pruneFinished } from '../state/retention.ts';
import { type TracingSettings, tracingSettings } from '../telemetry/settings.ts';
import { startTracing } from '../telemetry/tracing.ts';
import { loadConfig } from './config.ts';
import { startOrchestratorInbox } from './inbox.ts';
import { ingressKeysKeptMs, startOrchestratorIngress } from './ingress.ts';
import { Orchestrator } from './orchestrator.ts';
import { ORCHESTRATOR_PROGRAM } from './program.ts';
import { startRetention } from './retention.ts';

const PROGRAM = 'holt orchestrator';

/**
 * Composition root of `holt orchestrator`: configuration, the probe server and the orchestrator.
 * Returns the exit code: 78 with one line on stderr for bad configuration, 2 for bad usage, 0 after
 * SIGTERM/SIGINT or --help/--version (nothing started).
 */
export async function main(argv: string[], processEnv: NodeJS.ProcessEnv): Promise<number> {
  const cli = parseProgram(ORCHESTRATOR_PROGRAM, argv, processEnv);
  if (!cli.run) return cli.exitCode;
  const env = cli.env;
  let config: ReturnType<typeof loadConfig>;
  let traceSettings: TracingSettings;
  try {
    config = loadConfig(env);
    traceSettings = tracingSettings(env);
  } catch (e) {
    return configErrorExit(e, PROGRAM);
  }
  // Scalable roles: grants become inbox rows + doorbells; the watchdog sweeps while we lead.
  let orch: Orchestrator | undefined;
  let depth: InboxMetrics | undefined;
  const inboxBb = Blackboard.connect(config.redisUrl, config.instance);
  inboxBb.redis.on('error', () => {
    // ioredis reconnects by itself; the watchdog's stages log what failed, and retry on the next pass
  });
  let inbox: Awaited<ReturnType<typeof startOrchestratorInbox>>;
  const log = createLogger('orchestrator', { instance: config.instance });
  const tracing = startTracing('orchestrator', traceSettings, log, {
    attributes: { 'holt.instance': config.instance },
  });
  try {
    // On a cluster the stores may start after the orchestrator: wait for them (about three minutes)
    // instead of exiting into a crash-loop back-off that would delay the Holt by minutes more.
    inbox = await retry(
      () =>
        startOrchestratorInbox({
          instance: config.instance,
          env,
          bb: inboxBb,
          isLeader: () => orch?.isLeader() ?? false,
          onDepth: (d) => depth?.observe(d),
          log,
        }),
      {
        tries: 40,
        baseMs: 1000,
        maxMs: 8000,
        retryIf: (e) => !(e instanceof ConfigError),
        onRetry: (e, attempt, delayMs) =>
          log.warn(
            { event_type: 'stores_unavailable', attempt, retry_ms: delayMs, error: (e as Error).message },
            'Postgres or NATS not reachable yet; retrying',
          ),
      },
    );
  } catch (e) {
    await inboxBb.close();
    return configErrorExit(e, PROGRAM);
  }
  orch = new Orchestrator({
    config,
    scalableDispatcher: inbox?.dispatcher,
    traceWorkflows: tracing.exporting,
  });
  // Process and Node metrics (CPU, memory, event loop lag, GC) beside ours, on the same /metrics.
  collectDefaultMetrics({ register: orch.metrics.registry });
  depth = inbox ? new InboxMetrics(orch.metrics.registry) : undefined;
  const probes = await startProbeServer({
    port: config.healthPort,
    registry: orch.metrics.registry,
    healthz: async () => {
      try {
        await withTimeout(orch.ping(), 2_000);
      } catch (e) {
        return { ok: false, reason: (e as Error).message, details: { redis: 'disconnected' } };
      }
      const bus = inbox?.problem();
      if (bus) return { ok: false, reason: bus, details: { redis: 'connected', nats: 'closed' } };
      return { ok: true, details: { redis: 'connected' } };
    },
    readyz: async () => {
      await withTimeout(orch.ping(), 2_000);
      const inboxDown = await inbox?.unready();
      if (inboxDown)
        return { ok: false, reason: inboxDown, details: { redis: 'connected', leader: orch.isLeader() } };
      return { ok: true, details: { redis: 'connected', leader: orch.isLeader() } };
    },
  });
  orch.start();
  let ingress: Awaited<ReturnType<typeof startOrchestratorIngress>>;
  try {
    ingress = await startOrchestratorIngress({
      instance: config.instance,
      env,
      bb: inboxBb,
      inbox,
      log,
      isLeader: () => orch.isLeader(),
      registry: orch.metrics.registry,
    });
  } catch (e) {
    await orch.stop();
    await inbox.close();
    await inboxBb.close();
    await probes.close();
    return configErrorExit(e, PROGRAM);
  }
  const store = inbox?.store;
  const retention = startRetention({
    bb: inboxBb,
    isLeader: () => orch.isLeader(),
    log: orch.log,
    days: config.retentionDays,
    sweepMs: config.retentionSweepMs,
    postgres:
      store &&
      ((olderThanMs) =>
        pruneFinished(store.pool, config.instance, olderThanMs, 1000, ingressKeysKeptMs(env))),
    registry: orch.metrics.registry,
  });
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  orch.log.info({ event_type: 'shutdown', signal }, 'shutdown');
  retention.stop();
  await ingress?.close();
  await orch.stop();
  await inbox?.close();
  await inboxBb.close();
  await probes.close();
  await tracing.shutdown();
  return 0;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new Error(`redis ping timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2), process.env).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`${PROGRAM}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    },
  );
}
