import type { AgentSpec, AgentVolume } from '../../api/agent.ts';
import type { HoltSpec } from '../../api/holt.ts';
import type { WorkerPoolSpec } from '../../api/workerpool.ts';
import type { KubeObject } from '../kube/kube.ts';
import { labels, meta, type Owner, selectorLabels } from './meta.ts';
import { pupPodTemplate, type StoreAddresses } from './pup.ts';

/** The selector string of a pool's pods (status.selector, read by the HPA through /scale). */
export function poolSelector(pool: string): string {
  return Object.entries(selectorLabels(pool, 'worker'))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

/** Replicas the worker Deployment runs: spec.replicas when someone set it, else the minimum. */
export const poolReplicas = (p: WorkerPoolSpec) => p.replicas ?? p.autoscaling.minReplicas;

/**
 * The pool's Deployment of inbox workers (HOLT_MODE=worker). The agent the pool serves, when it
 * exists, supplies prompts, bidding-free settings and LLM config; the pool's own fields win.
 */
export function workerDeployment(
  owner: Owner,
  pool: WorkerPoolSpec,
  agent: (AgentSpec & { role: string; volumes?: AgentVolume[] }) | undefined,
  holtSpec: HoltSpec,
  runtimeImage: string,
  stores?: StoreAddresses,
): KubeObject {
  const name = owner.name;
  const base: AgentSpec & { role: string } = agent ?? {
    role: pool.role,
    env: [],
    bidding: { strategy: 'claim' },
    prompts: {},
    replicas: 1,
    strategy: 'reuse',
    workspace: { mode: 'ro' },
    egress: false,
  };
  const command = pool.command ?? base.worker?.command ?? base.command;
  const worker: AgentSpec & { role: string } = {
    ...base,
    role: pool.role,
    env: [...pool.env, ...base.env.filter((e) => !pool.env.some((p) => p.name === e.name))],
    ...(command
      ? { command, worker: { ...base.worker, command, maxConcurrent: base.worker?.maxConcurrent ?? 1 } }
      : {}),
    ...(pool.resources ? { resources: pool.resources } : {}),
  };
  const lbls = labels(pool.holt, name, 'worker', { 'holt.io/role': pool.role });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(name, owner, lbls),
    spec: {
      replicas: poolReplicas(pool),
      selector: { matchLabels: selectorLabels(name, 'worker') },
      template: pupPodTemplate({
        holt: pool.holt,
        holtSpec,
        agent: worker,
        mode: 'worker',
        runtimeImage,
        image: pool.image ?? base.worker?.image ?? base.image,
        workspaceMode: base.worker?.workspaceMode ?? base.workspace.mode,
        labels: lbls,
        volumes: agent?.volumes,
        extraEnv: [
          { name: 'HOLT_WORKER_TARGET', value: pool.target },
          { name: 'HOLT_WORKER_CONCURRENCY', value: String(pool.concurrency) },
          {
            name: 'HOLT_SHUTDOWN_GRACE_MS',
            value: String(Math.max(0, pool.terminationGracePeriodSeconds - 5) * 1000),
          },
        ],
        // Workers drain on SIGTERM; the grace period bounds the drain.
        terminationGracePeriodSeconds: pool.terminationGracePeriodSeconds,
        stores,
      }),
    },
  };
}
