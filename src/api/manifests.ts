import { isScalable, workerTargetOf } from './agent.ts';
import { API_VERSION } from './common.ts';
import type { HoltFile } from './holtfile.ts';

/** A Kubernetes object name from a role: DNS-1123, lower case. */
export function k8sName(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63);
}

function prune<T>(v: T): T {
  if (Array.isArray(v)) return v.map(prune) as T;
  if (v && typeof v === 'object') {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) o[k] = prune(x);
    return o as T;
  }
  return v;
}

/** The Holt, Agent and WorkerPool resources equivalent to a Holt file (what `holt convert` prints). */
export function manifestsFromHoltFile(
  file: HoltFile,
  name: string,
  namespace?: string,
): Record<string, unknown>[] {
  const meta = (n: string) => prune({ name: n, namespace });
  const { workspace, ...holtSpec } = file.holt;
  const { path: _localPath, ...k8sWorkspace } = workspace;
  const docs: Record<string, unknown>[] = [
    {
      apiVersion: API_VERSION,
      kind: 'Holt',
      metadata: meta(name),
      spec: prune({ ...holtSpec, workspace: k8sWorkspace }),
    },
  ];
  for (const a of file.agents) {
    const agentName = k8sName(`${name}-${a.role}`);
    const scalable = isScalable(a);
    const poolName = scalable ? `${agentName}-workers` : undefined;
    docs.push({
      apiVersion: API_VERSION,
      kind: 'Agent',
      metadata: meta(agentName),
      spec: prune({ holt: name, ...a, workerPool: poolName }),
    });
    if (scalable && poolName)
      docs.push({
        apiVersion: API_VERSION,
        kind: 'WorkerPool',
        metadata: meta(poolName),
        spec: prune({
          holt: name,
          role: a.role,
          target: workerTargetOf(a, a.role),
          concurrency: 1,
          image: a.worker?.image,
          command: a.worker?.command,
          autoscaling: {
            mode: 'builtin',
            minReplicas: 0,
            maxReplicas: a.worker?.maxConcurrent ?? a.replicas,
          },
        }),
      });
  }
  return docs;
}
