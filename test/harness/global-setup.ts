import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopClusterAt } from '../cluster/cluster.ts';
import { joinTestCgroup } from '../cluster/cpu-weight.ts';
import { processStartTime } from './proc.ts';

/**
 * One temp root per test run. Each server records its pid in <root>/pids; teardown kills whatever
 * is still there, so no server outlives `make test`, even when a test file crashed.
 */
export default function setup(): () => Promise<void> {
  const root = join(tmpdir(), `holt-test-${process.pid}`);
  const pids = join(root, 'pids');
  mkdirSync(pids, { recursive: true });
  process.env.HOLT_TEST_TMP = root;
  process.env.HOLT_TEST_PID_DIR = pids;
  // Before vitest starts a test process: each inherits the cgroup, and so do the servers it starts.
  const alone = joinTestCgroup();
  if (alone) console.warn(`harness: the tests keep the kernel's CPU weights (${alone})`);
  return async () => {
    // A local cluster a crashed test file left running: its mounts, namespaces and bridge go first.
    for (const d of existsSync(root) ? readdirSync(root) : [])
      if (existsSync(join(root, d, 'cluster.json'))) await stopClusterAt(join(root, d)).catch(() => {});
    if (!existsSync(pids)) return;
    for (const f of readdirSync(pids)) {
      const pid = Number(f);
      if (!Number.isInteger(pid)) continue;
      const [name = '', start = ''] = readFileSync(join(pids, f), 'utf8').split('\n');
      // A pid whose process ended may name another one by now (pid reuse): never kill that one.
      if (start && processStartTime(pid) !== start) continue;
      try {
        process.kill(pid, 'SIGKILL');
        console.warn(`harness: killed leftover ${name} (pid ${pid})`);
      } catch {
        // already gone
      }
    }
    // HOLT_TEST_KEEP=1 keeps logs and data of a failed run to read.
    if (process.env.HOLT_TEST_KEEP) console.warn(`harness: kept ${root}`);
    else rmSync(root, { recursive: true, force: true });
  };
}
