import { createLogger } from '../../common/logger.ts';
import { startRunnerServer } from './socket.ts';

/**
 * `holt tool-runner`: the agent container's process. It holds no credential (the pod gives Secrets to
 * the pup container only), so whatever a tool finds here is the contract and what the agent declared.
 */
export async function main(socket: string, env: NodeJS.ProcessEnv): Promise<number> {
  const log = createLogger('tool-runner', { agent: env.HOLT_AGENT_NAME });
  let server: Awaited<ReturnType<typeof startRunnerServer>>;
  try {
    server = await startRunnerServer({ socket, env, log });
  } catch (e) {
    process.stderr.write(`holt tool-runner: cannot listen on ${socket}: ${(e as Error).message}\n`);
    return 1;
  }
  log.info({ event_type: 'runner_started', socket });
  const sig = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  // The pup stops first (its grace covers its tool); then nothing is left to run.
  log.info({ event_type: 'signal_received', signal: sig });
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return 0;
}
