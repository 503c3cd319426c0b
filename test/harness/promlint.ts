import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cacheDir } from '../../src/local/bins.ts';

const run = promisify(execFile);
const SRC = join(import.meta.dirname, '..', '..', 'tools', 'promlint');

/**
 * Prometheus's own metrics linter (client_golang's promlint: `promtool check metrics`), built once
 * from tools/promlint through the Go module proxy into the cache, keyed by its sources.
 */
async function binary(): Promise<string> {
  const key = createHash('sha256')
    .update(['main.go', 'go.mod', 'go.sum'].map((f) => readFileSync(join(SRC, f), 'utf8')).join('\0'))
    .digest('hex')
    .slice(0, 12);
  const dir = join(cacheDir(), 'tools', 'promlint');
  const bin = join(dir, `promlint-${key}`);
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  await run('go', ['build', '-mod=mod', '-trimpath', '-o', bin, '.'], {
    cwd: SRC,
    env: { ...process.env, CGO_ENABLED: '0' },
  });
  return bin;
}

/** The problems promlint finds in a text exposition, as "metric: text" lines ([] when clean). */
export async function promlint(exposition: string): Promise<string[]> {
  const bin = await binary();
  return new Promise((resolve, reject) => {
    const child = execFile(bin, [], (err, stdout, stderr) => {
      const lines = stdout.split('\n').filter(Boolean);
      if (!err) resolve([]);
      else if (err.code === 3) resolve(lines);
      else reject(new Error(`promlint: ${stderr.trim() || err.message}`));
    });
    child.stdin?.end(exposition);
  });
}
