import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { cacheDir } from '../../src/local/bins.ts';
import type { KubeTools } from '../../test/harness/kube.ts';

/**
 * Where the last run of the cluster e2e leaves its logs: outside the clone, so that a CI run's
 * logs outlive its clone and the next session on the machine can read why it failed (CI shows only
 * the tail of its output). Replaced by each run.
 */
export function keptLogsDir(): string {
  return process.env.HOLT_E2E_LOGS ?? join(cacheDir(), 'e2e-last');
}

/** Files of the cluster's directory worth keeping: its processes' logs and the pods' logs. */
function logFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      // containerd's own trees hold the images' root filesystems (and their /var/log): never logs of ours.
      if (e.isDirectory() && e.name !== 'containerd' && e.name !== 'kubelet' && e.name !== 'volumes') walk(p);
      else if (e.isFile() && e.name.endsWith('.log')) out.push(p);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

/** A run starts with no logs of the last one. */
export function clearKeptLogs(): void {
  rmSync(keptLogsDir(), { recursive: true, force: true });
}

/**
 * The pods, events and operator log as the API server shows them, then every log file under the
 * cluster's directory, copied to keptLogsDir()/`moment` (taken before teardown deletes the Holts, whose
 * pods' logs go with them, and at the end). Best effort: a failure here is printed, never a failed run.
 */
export async function keepClusterLogs(
  kube: KubeTools,
  clusterDir: string | undefined,
  moment: string,
  log: (l: string) => void,
) {
  const to = join(keptLogsDir(), moment);
  try {
    rmSync(to, { recursive: true, force: true });
    mkdirSync(to, { recursive: true });
    const get = async (name: string, args: string[]) => {
      const r = await kube.kubectlResult(args, { allowFail: true });
      writeFileSync(join(to, name), `${r.stdout}${r.stderr}`);
    };
    await get('pods.txt', ['get', 'pods', '-A', '-o', 'wide']);
    await get('holts.txt', ['get', 'holts,agents,workerpools,toolservers,jobs,pvc', '-A', '-o', 'wide']);
    await get('events.txt', ['get', 'events', '-A', '--sort-by=.lastTimestamp']);
    await get('operator.log', [
      '-n',
      'holt-system',
      'logs',
      '-l',
      'app.kubernetes.io/name=holt-operator',
      '--tail=-1',
      '--prefix',
    ]);
    let bytes = 0;
    for (const f of clusterDir ? logFiles(clusterDir) : []) {
      const dest = join(to, 'cluster', relative(clusterDir!, f));
      mkdirSync(join(dest, '..'), { recursive: true });
      cpSync(f, dest);
      bytes += statSync(f).size;
    }
    log(`e2e logs kept in ${to} (${Math.round(bytes / 1e6)} MB of log files)`);
  } catch (e) {
    log(`e2e logs not kept: ${String(e)}`);
  }
}
