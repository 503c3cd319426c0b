import { createLogger } from '../common/logger.ts';
import { startBridge } from './bridge.ts';

export interface BridgeArgs {
  port: number;
  host: string;
  path: string;
  hostnames: string[];
  maxSessions: number;
  idleSeconds: number;
}

/** `holt mcp-bridge [options] -- <command> [args...]`: serves a stdio MCP server until SIGTERM. */
export async function main(argv: string[], o: BridgeArgs, env: NodeJS.ProcessEnv): Promise<number> {
  const [command, ...args] = argv;
  if (!command) {
    process.stderr.write('holt mcp-bridge: give the server command after --\n');
    return 2;
  }
  const log = createLogger('mcp-bridge', {});
  let bridge: Awaited<ReturnType<typeof startBridge>>;
  try {
    bridge = await startBridge({
      command,
      args,
      env,
      port: o.port,
      host: o.host,
      path: o.path,
      hostnames: o.hostnames,
      maxSessions: o.maxSessions,
      idleMs: o.idleSeconds * 1000,
      log,
    });
  } catch (e) {
    process.stderr.write(`holt mcp-bridge: cannot listen on ${o.host}:${o.port}: ${(e as Error).message}\n`);
    return 1;
  }
  const sig = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  log.info({ event_type: 'signal_received', signal: sig });
  await bridge.close();
  return 0;
}

/** The CLI's options (strings) checked; a bad one is a usage error (exit 2). */
export async function run(
  argv: string[],
  o: Record<string, string | string[]>,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const num = (k: string, flag: string) => {
    const n = Number(o[k]);
    if (!Number.isInteger(n) || n < 0 || n > 65535 * 1000)
      throw new Error(`--${flag} must be a whole number`);
    return n;
  };
  let args: BridgeArgs;
  try {
    args = {
      port: num('port', 'port'),
      host: String(o.listen),
      path: String(o.path),
      hostnames: [o.hostname ?? []].flat(),
      maxSessions: num('maxSessions', 'max-sessions'),
      idleSeconds: num('idleSeconds', 'idle-seconds'),
    };
  } catch (e) {
    process.stderr.write(`holt mcp-bridge: ${(e as Error).message}\n`);
    return 2;
  }
  return main(argv, args, env);
}
