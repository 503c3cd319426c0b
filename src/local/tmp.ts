import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh directory under the run's temp root; world-traversable so a dropped-privilege server can use it. */
export function makeTempDir(prefix: string): string {
  const root = process.env.HOLT_TEST_TMP ?? tmpdir();
  const dir = mkdtempSync(join(root, `${prefix}-`));
  chmodSync(dir, 0o755);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}
