import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

/** Where `make setup` caches what it builds or downloads (outside the git clone). */
export function cacheDir(): string {
  return process.env.HOLT_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'holt');
}

export class MissingBinaryError extends Error {
  constructor(name: string, looked: string[]) {
    super(`${name} is not installed (looked in ${looked.join(', ')}): run \`make setup\``);
    this.name = 'MissingBinaryError';
  }
}

/** Directories searched for a binary: the explicit ones, then PATH. */
function candidates(extraDirs: string[]): string[] {
  return [...extraDirs, ...(process.env.PATH ?? '').split(delimiter).filter(Boolean)];
}

export function findBinary(name: string, extraDirs: string[] = []): string {
  const dirs = candidates(extraDirs);
  for (const d of dirs) {
    const p = join(d, name);
    if (existsSync(p)) return p;
  }
  throw new MissingBinaryError(name, extraDirs.length ? extraDirs.concat('$PATH') : ['$PATH']);
}

/** Debian installs Postgres server binaries under /usr/lib/postgresql/<major>/bin, not on PATH. */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (majors[0]) return join(root, majors[0], 'bin');
  const postgres = findBinary('postgres');
  return postgres.slice(0, -'/postgres'.length);
}

/** Paths written by scripts/setup/k8s.sh; KUBEBUILDER_ASSETS (a directory of binaries) overrides them. */
export function kubeBinary(name: string): string {
  const assets = process.env.KUBEBUILDER_ASSETS;
  if (assets) return findBinary(name, [assets]);
  const envFile = join(cacheDir(), 'k8s', 'current.env');
  if (existsSync(envFile)) {
    for (const line of readFileSync(envFile, 'utf8').split('\n')) {
      const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
      if (m?.[2] && m[1] === name.toUpperCase().replaceAll('-', '_') && existsSync(m[2])) return m[2];
    }
  }
  throw new MissingBinaryError(name, [envFile]);
}
