import { Blackboard } from '../../blackboard/client.ts';
import { createLogger } from '../../common/logger.ts';
import { createPool } from '../../common/pg.ts';
import { startConsole } from '../../console/server.ts';
import { CliError, EXIT, out } from '../output.ts';
import { resolveInstance, resolveTarget } from '../resolve.ts';
import { remotePostgres, remoteTarget } from '../target.ts';

export interface ConsoleOptions {
  name?: string;
  port?: string;
  /** The link signs in a session that may look but not answer or approve. */
  readOnly?: boolean;
  /** A trace viewer's base URL: workflows' trace ids link there. */
  tracesUrl?: string;
}

/**
 * `holt console`: the console of a Holt (docs/console.md) on 127.0.0.1, opened with the one-time link
 * it prints; with --kube, of a Holt in a cluster, through the API server like the other commands.
 */
export async function consoleCommand(opts: ConsoleOptions): Promise<void> {
  const port = Number(opts.port ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new CliError(`--port: "${opts.port}" is not a port number`, EXIT.usage);
  const tracesUrl = opts.tracesUrl ?? process.env.HOLT_TRACES_UI_URL;
  if (tracesUrl && !/^https?:\/\/\S+$/.test(tracesUrl))
    throw new CliError(`--traces-url: "${tracesUrl}" is not an http(s) URL`, EXIT.usage);
  const s = resolveTarget(opts.name);
  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  // The Holt's Postgres (--kube: its port-forward; else the local instance's): the living agents page.
  const remotePg = remotePostgres();
  const pgUrl = remoteTarget() ? remotePg?.url : resolveInstance(opts.name).postgresUrl;
  const pool = pgUrl
    ? createPool(pgUrl, { max: 2, ...(remotePg?.ssl ? { ssl: remotePg.ssl } : {}) })
    : undefined;
  let c: Awaited<ReturnType<typeof startConsole>>;
  try {
    c = await startConsole({
      bb,
      log: createLogger('console', {}),
      port,
      readOnly: opts.readOnly === true,
      ...(pool ? { pool } : {}),
      ...(tracesUrl ? { tracesUrl } : {}),
    });
  } catch (e) {
    await bb.close();
    await pool?.end();
    throw new CliError(`console: ${(e as Error).message}`, EXIT.error);
  }
  out(`Console of '${s.name}': ${c.url}`);
  out('The link works once (it signs this browser in); Ctrl-C stops.');
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await c.close();
  await bb.close();
  await pool?.end();
}
