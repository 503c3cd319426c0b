import { realpathSync } from 'node:fs';
import { type HoltFile, HoltFileError, loadHoltFile } from '../api/holtfile.ts';
import { effectiveStatus, type InstanceState, listInstances, readState } from '../local/instance.ts';
import { gitSync } from '../pup/git.ts';
import { CliError, EXIT } from './output.ts';
import { type BlackboardTarget, remoteTarget } from './target.ts';

export { type BlackboardTarget, positiveInt } from './target.ts';

/** The git top-level of `dir` (symlinks resolved), or `dir` itself outside a repository. Hardened git. */
export function workspaceOf(dir = process.cwd()): string {
  try {
    return realpathSync(gitSync(dir, ['rev-parse', '--show-toplevel']).trim());
  } catch {
    return realpathSync(dir);
  }
}

/** The Holt given by --kube, else the local instance (--name, HOLT_INSTANCE or this workspace's). */
export function resolveTarget(name?: string): BlackboardTarget {
  const remote = remoteTarget();
  if (remote) return remote;
  const s = resolveInstance(name);
  return { name: s.name, redisUrl: s.redisUrl!, workspace: s.workspace };
}

/** --name, else HOLT_INSTANCE, else the one running instance of this workspace (as Holt infers it). */
export function resolveInstance(
  name?: string,
  opts: { mustRun?: boolean } = { mustRun: true },
): InstanceState {
  const wanted = name ?? process.env.HOLT_INSTANCE;
  if (wanted) {
    const s = readState(wanted);
    if (!s)
      throw new CliError(`instance '${wanted}' not found: run \`holt list\` to see instances`, EXIT.notFound);
    if (opts.mustRun && effectiveStatus(s) !== 'running' && effectiveStatus(s) !== 'degraded')
      throw new CliError(
        `instance '${wanted}' is not running (${effectiveStatus(s)}): start it with \`holt up\``,
        EXIT.notFound,
      );
    return s;
  }
  const ws = workspaceOf();
  const mine = listInstances().filter(
    (s) => s.workspace === ws && (!opts.mustRun || ['running', 'degraded'].includes(effectiveStatus(s))),
  );
  if (mine.length === 0)
    throw new CliError(
      'no Holt instances found for this workspace: run `holt up` first, or pass --name',
      EXIT.notFound,
    );
  if (mine.length > 1)
    throw new CliError(
      `multiple instances found for this workspace (${mine.map((s) => s.name).join(', ')}): use --name`,
      EXIT.usage,
    );
  return mine[0]!;
}

/** Holt's time flags: RFC3339, or a duration (30s, 5m, 2h, 1d) before now. */
export function parseTime(flag: string, value: string, now = Date.now()): number {
  const d = /^(\d+)(ms|s|m|h|d)$/.exec(value);
  if (d)
    return (
      now -
      Number(d[1]) *
        { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[d[2] as 'ms' | 's' | 'm' | 'h' | 'd']
    );
  const t = Date.parse(value);
  if (Number.isNaN(t))
    throw new CliError(`${flag}: "${value}" is neither an RFC3339 time nor a duration like 5m`, EXIT.usage);
  return t;
}

/** A whole number flag (seconds, lines) parsed with a schema: `--timeout abc` is a usage error, not NaN. */

/** The Holt file, with its problems as a usage error (exit 2) listing each with its path. */
export function readHoltFile(file: string): HoltFile {
  try {
    return loadHoltFile(file);
  } catch (e) {
    if (e instanceof HoltFileError) throw new CliError(e.message, EXIT.usage);
    throw e;
  }
}
