import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { runProcess } from './process.ts';

/**
 * Git run in a workspace that a tool could write: every knob by which a repository's own files make git
 * run a program is turned off (fsmonitor, hooks, lazy fetching of a partial clone through a planted
 * uploadpack, pagers, filter drivers), and the environment is empty but for PATH, so even a way in
 * nobody listed here would find no credential. The workspace is hostile input (docs/security.md).
 */

/** A commit reference a tool may return: a full object id (SHA-1 or SHA-256), never a name git resolves. */
export const COMMIT_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** Why `rev` is not a commit reference the pup accepts, or undefined. */
export function commitRefProblem(rev: string): string | undefined {
  if (COMMIT_ID.test(rev)) return undefined;
  return `not a full commit id (40 or 64 lowercase hex digits): ${JSON.stringify(rev.slice(0, 80))}`;
}

/** The only environment git gets: the caller's PATH, and git's own configuration files switched off. */
export function gitEnv(base: NodeJS.ProcessEnv): Record<string, string> {
  return {
    PATH: base.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    // Honoured from git 2.39.4/2.44 on; protocol.allow=never below blocks the fetch on older ones.
    GIT_NO_LAZY_FETCH: '1',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_PAGER: 'cat',
  };
}

/** `-c` pairs as git reads them on its command line (they override the repository's config). */
const pairs = (kv: [string, string][]) => kv.flatMap(([k, v]) => ['-c', `${k}=${v}`]);

/**
 * The global options that switch off what a repository's config could run. `dir` is trusted as a
 * safe.directory (the system-wide list is not read); `filters` are the filter drivers its config names,
 * each emptied (git runs a clean filter when it compares a file, as `status` does).
 */
export function gitArgs(dir: string, filters: string[] = []): string[] {
  return [
    '--no-pager',
    ...pairs([
      ['core.fsmonitor', 'false'],
      ['core.hooksPath', '/dev/null'],
      ['core.pager', 'cat'],
      ['core.sshCommand', 'false'],
      ['core.gitProxy', ''],
      ['core.askPass', ''],
      ['core.untrackedCache', 'false'],
      ['protocol.allow', 'never'],
      ['submodule.recurse', 'false'],
      ['diff.external', ''],
      ['credential.helper', ''],
      ['safe.directory', dir],
      ...filters.flatMap((f): [string, string][] => [
        [`filter.${f}.clean`, ''],
        [`filter.${f}.smudge`, ''],
        [`filter.${f}.process`, ''],
        [`filter.${f}.required`, 'false'],
      ]),
    ]),
  ];
}

/** The filter driver names in `git config --name-only --get-regexp '^filter\.'` output; undefined if any is unusable. */
export function filterNames(listing: string): string[] | undefined {
  const names = new Set<string>();
  for (const line of listing.split('\n')) {
    if (!line) continue;
    const m = /^filter\.(.+)\.[^.]+$/.exec(line);
    // A name with `=` would not survive `-c name=value`; refuse rather than leave it running.
    if (!m?.[1] || /[=\n]/.test(m[1])) return undefined;
    names.add(m[1]);
  }
  return [...names];
}

const real = (dir: string) => {
  try {
    return realpathSync(dir);
  } catch {
    return dir;
  }
};

/**
 * Runs hardened git synchronously (the CLI's short reads of a workspace). Throws as execFileSync does.
 * With `compare`, the repository's filter drivers are listed first and emptied (for `status`).
 */
export function gitSync(
  dir: string,
  args: string[],
  opts: { compare?: boolean; base?: NodeJS.ProcessEnv } = {},
) {
  const env = gitEnv(opts.base ?? process.env);
  const safe = real(dir);
  let filters: string[] = [];
  if (opts.compare) {
    let listing = '';
    try {
      listing = execFileSync(
        'git',
        [...gitArgs(safe), 'config', '--name-only', '--get-regexp', '^filter\\.'],
        {
          cwd: dir,
          env,
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
          timeout: 30_000,
        },
      );
    } catch (e) {
      // Exit 1: no filter configured. Anything else (not a repository, say) is the caller's failure.
      if ((e as { status?: number }).status !== 1) throw e;
    }
    const names = filterNames(listing);
    if (!names) throw new Error('the repository configures a filter driver whose name git cannot override');
    filters = names;
  }
  return execFileSync('git', [...gitArgs(safe, filters), ...args], {
    cwd: dir,
    env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 30_000,
  });
}

export interface CommitCheck {
  ok: boolean;
  detail: string;
}

/**
 * Whether `rev` names a commit in the workspace's repository: `git cat-file -t`, hardened, run where
 * the tools run (the tool runner, which holds no credential). Never throws.
 */
export async function checkCommit(
  workspace: string,
  rev: string,
  base: NodeJS.ProcessEnv,
  timeoutMs = 30_000,
): Promise<CommitCheck> {
  const problem = commitRefProblem(rev);
  if (problem) return { ok: false, detail: problem };
  const run = await runProcess({
    argv: ['git', ...gitArgs(real(workspace)), 'cat-file', '-t', rev],
    cwd: workspace,
    stdin: '',
    timeoutMs,
    maxBytes: 64 * 1024,
    env: gitEnv(base),
  });
  if (run.spawnError) return { ok: false, detail: `git could not be started: ${run.spawnError}` };
  if (run.timedOut) return { ok: false, detail: `git did not answer within ${timeoutMs} ms` };
  if (run.exitCode !== 0) return { ok: false, detail: run.stderr.trim().slice(0, 500) || 'no such object' };
  const type = run.stdout.trim();
  return type === 'commit'
    ? { ok: true, detail: '' }
    : { ok: false, detail: `${rev} is a ${type}, not a commit` };
}
