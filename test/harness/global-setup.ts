import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * One temp root per test run. Each server records its pid in <root>/pids; teardown kills whatever
 * is still there, so no server outlives `make test`, even when a test file crashed.
 */
export default function setup(): () => void {
  const root = join(tmpdir(), `holt-test-${process.pid}`);
  const pids = join(root, 'pids');
  mkdirSync(pids, { recursive: true });
  process.env.HOLT_TEST_TMP = root;
  process.env.HOLT_TEST_PID_DIR = pids;
  return () => {
    if (!existsSync(pids)) return;
    for (const f of readdirSync(pids)) {
      const pid = Number(f);
      if (!Number.isInteger(pid)) continue;
      const name = readFileSync(join(pids, f), 'utf8').trim();
      try {
        process.kill(pid, 'SIGKILL');
        console.warn(`harness: killed leftover ${name} (pid ${pid})`);
      } catch {
        // already gone
      }
    }
    rmSync(root, { recursive: true, force: true });
  };
}
