import { existsSync, mkdirSync } from 'node:fs';
import { type LocalCluster, projectImages, startCluster } from '../../test/cluster/cluster.ts';
import { type KubeTools, kubeTools } from '../../test/harness/kube.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { clearKeptLogs, keepClusterLogs } from './keep-logs.ts';

/**
 * Where the e2e runs: the cluster named by HOLT_E2E_KUBECONFIG (kind, or any cluster with the
 * project's images loaded), else the project's own local cluster, started here with the images that
 * `make images` built and stopped at the end.
 */
export interface E2eTarget extends KubeTools {
  kubeconfigPath: string;
  /** The local cluster when this run started one (node-level tests need it). */
  local?: LocalCluster;
  /** Copies what the run's logs say so far to keptLogsDir()/`moment`. */
  keepLogs(moment: string): Promise<void>;
  stop(): Promise<void>;
}

export async function e2eTarget(nodes: number, log: (l: string) => void): Promise<E2eTarget> {
  clearKeptLogs();
  const given = process.env.HOLT_E2E_KUBECONFIG;
  if (given) {
    if (!existsSync(given)) throw new Error(`HOLT_E2E_KUBECONFIG=${given}: no such file`);
    const home = makeTempDir('e2e-home');
    mkdirSync(home, { recursive: true });
    const tools = kubeTools(given, home);
    return {
      kubeconfigPath: given,
      ...tools,
      keepLogs: (moment: string) => keepClusterLogs(tools, undefined, moment, log),
      stop: async () => removeDir(home),
    };
  }
  const local = await startCluster({ name: 'e2e', nodes, images: projectImages(), log });
  return {
    ...local,
    local,
    keepLogs: (moment: string) => keepClusterLogs(local, local.clusterDir, moment, log),
    stop: () => local.stop(),
  };
}
