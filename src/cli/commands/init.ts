import { chmodSync, existsSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { CliError, EXIT, out } from '../output.ts';
import { workspaceOf } from '../resolve.ts';
import { BID_SH, DOCKERFILE, HOLT_YML, README, RUN_SH } from './init-templates.ts';

export interface InitOptions {
  force?: boolean;
}

/** What init writes, relative to the repository root, with its mode. */
const FILES: readonly [path: string, text: string, mode: number][] = [
  ['holt.yml', HOLT_YML, 0o644],
  ['agents/example-agent/run.sh', RUN_SH, 0o755],
  ['agents/example-agent/bid.sh', BID_SH, 0o755],
  ['agents/example-agent/Dockerfile', DOCKERFILE, 0o644],
  ['agents/example-agent/README.md', README, 0o644],
];

/**
 * `holt init`: a commented holt.yml and one example agent at the root of this git repository. Refuses
 * to overwrite any of them unless --force (which rewrites only these files, never the rest of agents/).
 */
export function init(opts: InitOptions, cwd = process.cwd()): void {
  const root = workspaceOf(cwd);
  if (!existsSync(join(root, '.git')))
    throw new CliError('holt init: run it in a git repository (git init first)', EXIT.usage);
  if (relative(root, realpathSync(cwd)) !== '')
    throw new CliError(`holt init: run it at the repository root (${root})`, EXIT.usage);
  const present = FILES.map(([p]) => p).filter((p) => existsSync(join(root, p)));
  if (present.length && !opts.force)
    throw new CliError(
      `holt init: already initialized (${present.join(', ')} exist); --force rewrites these files`,
      EXIT.usage,
    );
  for (const [p, text, mode] of FILES) {
    mkdirSync(join(root, p, '..'), { recursive: true });
    writeFileSync(join(root, p), text);
    chmodSync(join(root, p), mode);
  }
  out(`Wrote ${FILES.map(([p]) => p).join(', ')}`);
  out('Next: commit them, then `holt up` and `holt forage --goal "say hello" --watch`.');
}
