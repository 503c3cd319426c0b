import { randomUUID } from 'node:crypto';
import { Blackboard } from '../../blackboard/client.ts';
import { gitSync } from '../../pup/git.ts';
import { parseCarrier, type TraceCarrier } from '../../telemetry/carrier.ts';
import { createGoal as writeGoal } from '../board.ts';
import { CliError, EXIT, out } from '../output.ts';
import { resolveTarget } from '../resolve.ts';
import { watch } from './watch.ts';

/**
 * Holt refuses a dirty workspace (untracked files included) so agents start from a known commit. The
 * agents may have written its .git: git reads it hardened (no fsmonitor, hooks, filters; src/pup/git.ts).
 */
export function checkClean(workspace: string): void {
  let status: string;
  try {
    status = gitSync(workspace, ['status', '--porcelain', '--ignore-submodules=all'], { compare: true });
  } catch {
    throw new CliError(
      `${workspace} is not a git repository: run \`git init\` there, or pass --allow-dirty`,
      EXIT.dirty,
    );
  }
  if (status.trim())
    throw new CliError(
      `Git workspace is not clean: commit or stash these first, or pass --allow-dirty\n${status.trimEnd()}`,
      EXIT.dirty,
    );
}

/**
 * The trace a goal continues: --traceparent, else TRACEPARENT (as otel-cli and tools hand it on), else
 * none (the goal starts one). A malformed one is a usage error: the caller asked for a trace it would not get.
 */
export function goalTrace(flag: string | undefined, env: NodeJS.ProcessEnv): TraceCarrier | undefined {
  const given = flag ?? env.TRACEPARENT;
  if (!given) return undefined;
  const c = parseCarrier({
    traceparent: given,
    ...(env.TRACESTATE && !flag ? { tracestate: env.TRACESTATE } : {}),
  });
  if (!c)
    throw new CliError(
      `${flag ? '--traceparent' : 'TRACEPARENT'}: must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), got ${JSON.stringify(given.slice(0, 80))}`,
      EXIT.usage,
    );
  return c;
}

export async function forage(opts: {
  goal: string;
  name?: string;
  watch?: boolean;
  allowDirty?: boolean;
  output?: string;
  timeout?: string;
  traceparent?: string;
}): Promise<void> {
  if (!opts.goal.trim()) throw new CliError('--goal: must not be empty', EXIT.usage);
  const trace = goalTrace(opts.traceparent, process.env);
  const s = resolveTarget(opts.name);
  // A Holt in a cluster works in its own workspace (a volume cloned from gitUrl), not this directory.
  if (!opts.allowDirty && s.workspace) checkClean(s.workspace);
  const id = randomUUID();
  const createGoal = async () => {
    const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
    try {
      await writeGoal(bb, opts.goal, id, trace);
    } finally {
      await bb.close();
    }
    // JSONL output stays machine-readable: the goal appears in the stream itself.
    if (!opts.watch || opts.output === 'default' || !opts.output) out(`Goal artefact created: ${id}`);
  };
  if (!opts.watch) return createGoal();
  // Subscribe first so nothing the goal sets off is missed.
  await watch({
    name: s.name,
    output: opts.output ?? 'default',
    exitOnCompletion: true,
    timeout: opts.timeout,
    onReady: createGoal,
  });
}
