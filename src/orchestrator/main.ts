import { fileURLToPath } from 'node:url';
import { ConfigError } from '../common/config.ts';
import { startProbeServer } from '../common/http.ts';
import { loadConfig } from './config.ts';
import { Orchestrator } from './orchestrator.ts';

const PROGRAM = 'holt orchestrator';

/**
 * Composition root of `holt orchestrator`: configuration, the probe server and the orchestrator.
 * Returns the exit code: 1 with one line on stderr for bad configuration, 0 after SIGTERM/SIGINT.
 */
export async function main(_argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`${PROGRAM}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  const orch = new Orchestrator({ config });
  const probes = await startProbeServer({
    port: config.healthPort,
    registry: orch.metrics.registry,
    healthz: async () => {
      try {
        await withTimeout(orch.ping(), 2_000);
        return { ok: true, details: { redis: 'connected' } };
      } catch (e) {
        return { ok: false, reason: (e as Error).message, details: { redis: 'disconnected' } };
      }
    },
    readyz: async () => {
      await withTimeout(orch.ping(), 2_000);
      return { ok: true, details: { redis: 'connected', leader: orch.isLeader() } };
    },
  });
  orch.start();
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  orch.log.info({ event_type: 'shutdown', signal }, 'shutdown');
  await orch.stop();
  await probes.close();
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
