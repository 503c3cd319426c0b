import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir, MissingBinaryError } from '../../src/local/bins.ts';

/** Paths written by scripts/setup/cluster.sh (containerd, runc, CNI, CoreDNS, the provisioner, pause, Prometheus). */
export function clusterTool(
  name:
    | 'COREDNS'
    | 'LOCAL_PATH_PROVISIONER'
    | 'PAUSE'
    | 'BUSYBOX'
    | 'CONTAINERD'
    | 'CTR'
    | 'RUNC'
    | 'CNI_BIN_DIR'
    | 'KUBE_ROUTER'
    | 'PROMETHEUS',
): string {
  const envFile = join(cacheDir(), 'cluster', 'current.env');
  if (existsSync(envFile))
    for (const line of readFileSync(envFile, 'utf8').split('\n')) {
      const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
      if (m?.[1] === name && m[2] && existsSync(m[2])) return m[2];
    }
  throw new MissingBinaryError(name.toLowerCase().replaceAll('_', '-'), [envFile]);
}

export function clusterVersion(
  name: 'COREDNS_VERSION' | 'LOCAL_PATH_VERSION' | 'PROMETHEUS_VERSION',
): string {
  const envFile = join(cacheDir(), 'cluster', 'current.env');
  const m = new RegExp(`^${name}=(.*)$`, 'm').exec(existsSync(envFile) ? readFileSync(envFile, 'utf8') : '');
  if (!m?.[1]) throw new MissingBinaryError(name, [envFile]);
  return m[1];
}
