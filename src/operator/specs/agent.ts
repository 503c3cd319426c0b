import type { AgentResourceSpec as AgentResource } from '../../api/agent.ts';
import { workerTargetOf } from '../../api/agent.ts';
import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner, selectorLabels } from './meta.ts';
import { pupPodTemplate, type StoreAddresses } from './pup.ts';

/** An Agent resource's spec with its role resolved (metadata.name when the spec leaves it out). */
export type AgentResourceSpec = AgentResource & { role: string };
export type AgentShape = 'standard' | 'pool' | 'jobs';

/** standard: one pup; pool: a controller pup + worker pool; jobs: a controller pup + one Job per claim. */
export function shapeOf(a: AgentResourceSpec): AgentShape {
  if (a.strategy === 'fresh_per_call') return 'jobs';
  if (a.replicas > 1 || a.worker !== undefined) return 'pool';
  return 'standard';
}

export const agentPoolName = (agent: string) => childName(agent, 'workers');

/** The agent's pup Deployment: a standard pup, or the controller (bids only) of a scalable agent. */
export function agentDeployment(
  owner: Owner,
  a: AgentResourceSpec,
  holtSpec: HoltSpec,
  runtimeImage: string,
  stores?: StoreAddresses,
): KubeObject {
  const name = owner.name;
  const mode = shapeOf(a) === 'standard' ? 'standard' : 'controller';
  const component = mode === 'standard' ? 'agent' : 'controller';
  const lbls = labels(a.holt, name, component, { 'holt.io/role': a.role });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(name, owner, lbls),
    spec: {
      // One pup per agent: a second standard pup would bid twice for the same role.
      replicas: 1,
      strategy: { type: 'Recreate' },
      selector: { matchLabels: selectorLabels(name, component) },
      template: pupPodTemplate({
        holt: a.holt,
        holtSpec,
        agent: a,
        mode,
        runtimeImage,
        image: a.image,
        workspaceMode: a.workspace.mode,
        labels: lbls,
        volumes: a.volumes,
        stores,
      }),
    },
  };
}

/**
 * The WorkerPool a scalable agent owns. spec.replicas is left out on purpose: it belongs to the
 * autoscaler (or an HPA), and applying it here would fight them.
 */
export function agentWorkerPool(owner: Owner, a: AgentResourceSpec): KubeObject {
  const name = agentPoolName(owner.name);
  const max = a.worker?.maxConcurrent ?? a.replicas;
  return {
    apiVersion: 'holt.io/v1alpha1',
    kind: 'WorkerPool',
    metadata: meta(name, owner, labels(a.holt, name, 'worker-pool', { 'holt.io/role': a.role })),
    spec: {
      holt: a.holt,
      role: a.role,
      target: workerTargetOf(a, a.role),
      ...(a.worker?.image ? { image: a.worker.image } : {}),
      ...(a.worker?.command ? { command: a.worker.command } : {}),
      autoscaling: { mode: 'builtin', minReplicas: 0, maxReplicas: Math.max(1, max) },
    },
  };
}
