import { execFileSync } from 'node:child_process';

/** Makes `dir` a git repository with everything in it committed, as a user's project is before `holt up`. */
export function commitWorkspace(dir: string): void {
  const git = (...a: string[]) => execFileSync('git', a, { cwd: dir });
  git('init', '-q');
  git('add', '-A');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'init');
}
