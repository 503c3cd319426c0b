import { collectDefaultMetrics } from 'prom-client';
import { ConfigError, configErrorExit } from '../common/config.ts';
import { errorMessage } from '../common/errors.ts';
import { createLogger } from '../common/logger.ts';
import { parseProgram } from '../common/program.ts';
import { PUP_PROGRAM } from '../pup/program.ts';
import { loadWorkerEnv } from '../pup/worker-env.ts';
import { type TracingSettings, tracingSettings } from '../telemetry/settings.ts';
import { startTracing } from '../telemetry/tracing.ts';
import { type AgentConfig, loadAgentConfig } from './config.ts';
import { agentPup } from './wiring.ts';

const CONFIG_ERROR = 'holt pup: invalid configuration';

/**
 * The agent's composition root (`holt pup` / `node src/agent/main.ts`): the pup core with the command
 * executor and, for an agent with a model, the LLM plugin wired in. Returns the exit code: 78 for bad
 * configuration (one line naming the variable), 2 for bad usage, 1 for an unreachable Redis at start,
 * 0 after a signal or --help/--version (nothing started).
 */
export async function main(argv: string[], processEnv: NodeJS.ProcessEnv): Promise<number> {
  const cli = parseProgram(PUP_PROGRAM, argv, processEnv);
  if (!cli.run) return cli.exitCode;
  const env = cli.env;
  const claim = cli.opts.executeClaim;
  let cfg: AgentConfig;
  let traceSettings: TracingSettings;
  try {
    cfg = loadAgentConfig(typeof claim === 'string' ? ['--execute-claim', claim] : [], env);
    traceSettings = tracingSettings(env);
  } catch (e) {
    return configErrorExit(e, CONFIG_ERROR);
  }
  const log = createLogger('pup', { instance: cfg.instance, agent: cfg.role, mode: cfg.mode });
  const tracing = startTracing('pup', traceSettings, log, {
    attributes: { 'holt.instance': cfg.instance, 'holt.role': cfg.role },
  });
  const pup = agentPup(cfg, log);
  // Process and Node metrics (CPU, memory, event loop lag, GC) beside ours, on the same /metrics.
  collectDefaultMetrics({ register: pup.metrics.registry });
  let signalled: (sig: string) => void = () => undefined;
  const signal = new Promise<string>((resolve) => {
    signalled = resolve;
  });
  const onSignal = (sig: NodeJS.Signals) => signalled(sig);
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  try {
    if (cfg.mode === 'worker' && !cfg.executeClaim) {
      // Inbox-driven: claims from the worker target's inbox until SIGTERM, then drains.
      try {
        await pup.startInbox(loadWorkerEnv(env));
      } catch (e) {
        await pup.stop(0);
        if (e instanceof ConfigError) return configErrorExit(e, CONFIG_ERROR);
        log.error({ event_type: 'startup_failed', error: errorMessage(e) });
        return 1;
      }
      log.info({ event_type: 'signal_received', signal: await signal });
      await pup.stop();
      return 0;
    }
    if (cfg.mode === 'worker' && env.DATABASE_URL && env.NATS_URL) {
      // --execute-claim of a scalable role: through the grant's inbox row (fenced, exactly one result).
      const run = pup.runInboxClaim(loadWorkerEnv(env), cfg.executeClaim as string);
      void signal.then(() => pup.stop());
      const outcome = await run;
      if (outcome === 'no_row') {
        // Nothing due for this grant in the inbox: done already, held by another worker, in retry
        // backoff or parked on a question. Running it here (runClaim) would bypass the fence.
        log.info({
          event_type: 'worker_finished',
          outcome,
          source: 'inbox',
          rows: await pup.grantRows(cfg.executeClaim as string).catch((e) => [`unknown: ${String(e)}`]),
          reason: 'no due inbox row for this grant; nothing to run',
        });
        await pup.stop(0);
        return 0;
      }
      log.info({ event_type: 'worker_finished', outcome, source: 'inbox' });
      await pup.stop(0);
      // waiting: an LLM turn parked on a question; the watchdog wakes its row when the Answer exists.
      // released: stopped by a signal, the row handed back for another worker.
      return ['done', 'stale', 'waiting', 'released'].includes(outcome) ? 0 : 1;
    }
    if (cfg.mode === 'worker') {
      // A Holt without an inbox: the grant is run straight from the blackboard.
      const run = pup.runClaim(cfg.executeClaim as string);
      void signal.then(() => pup.stop());
      const { code, outcome } = await run;
      log.info({ event_type: 'worker_finished', outcome, exit_code: code });
      await pup.stop(0);
      return code;
    }
    try {
      await pup.start();
    } catch (e) {
      log.error({ event_type: 'startup_failed', error: errorMessage(e) });
      await pup.stop(0);
      return 1;
    }
    const sig = await signal;
    log.info({ event_type: 'signal_received', signal: sig });
    await pup.stop();
    return 0;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await tracing.shutdown();
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2), process.env);
}
