import type { InformerEvent } from '../kube/informer.ts';
import type { KubeObject } from '../kube/kube.ts';
import type { HoltRef } from './registry.ts';
import { keyOf } from './resources.ts';

interface ContainerStatus {
  name?: string;
  imageID?: string;
}

/**
 * The digest an agent's pod runs its tools from (the `agent` container's imageID: repo@sha256:… once
 * pulled, sha256:… for a local image), for the bidding pods (standard agents, controllers). Pure.
 */
export function agentImageOf(pod: KubeObject): { holt: HoltRef; role: string; image: string } | undefined {
  const l = pod.metadata.labels ?? {};
  const holt = l['holt.io/instance'];
  const role = l['holt.io/role'];
  const component = l['app.kubernetes.io/component'];
  if (!holt || !role || (component !== 'agent' && component !== 'controller')) return undefined;
  const statuses = ((
    pod as { status?: { containerStatuses?: ContainerStatus[]; initContainerStatuses?: ContainerStatus[] } }
  ).status ?? {}) as { containerStatuses?: ContainerStatus[]; initContainerStatuses?: ContainerStatus[] };
  // The agent container is a native sidecar (an init container that keeps running).
  const agent = [...(statuses.initContainerStatuses ?? []), ...(statuses.containerStatuses ?? [])].find(
    (c) => c.name === 'agent',
  );
  const image = agent?.imageID?.replace(/^docker-pullable:\/\//, '');
  if (!image) return undefined;
  return { holt: { namespace: pod.metadata.namespace ?? 'default', name: holt }, role, image };
}

/**
 * Holt's image audit on Kubernetes: role → the digest its pod runs, per Holt, from the operator's pod
 * informer. A changed digest calls `onChange` with the Holt, whose registry (and so agent_images and
 * every later grant) then carries it.
 */
export class AgentImages {
  /** holt key → role → { pod uid → digest }: the pod last seen with one wins while two run (a rollout). */
  readonly #byHolt = new Map<string, Map<string, Map<string, string>>>();
  readonly #onChange: (holt: HoltRef) => void;

  constructor(onChange: (holt: HoltRef) => void) {
    this.#onChange = onChange;
  }

  get(holt: HoltRef, role: string): string | undefined {
    const pods = this.#byHolt.get(keyOf(holt.namespace, holt.name))?.get(role);
    return pods ? [...pods.values()].at(-1) : undefined;
  }

  onPod(event: InformerEvent, pod: KubeObject): void {
    const found = agentImageOf(pod);
    const l = pod.metadata.labels ?? {};
    const holt = found?.holt ?? {
      namespace: pod.metadata.namespace ?? 'default',
      name: l['holt.io/instance'] ?? '',
    };
    const role = found?.role ?? l['holt.io/role'] ?? '';
    const key = keyOf(holt.namespace, holt.name);
    const uid = pod.metadata.uid ?? '';
    const before = this.get(holt, role);
    const roles = this.#byHolt.get(key) ?? new Map<string, Map<string, string>>();
    const pods = roles.get(role) ?? new Map<string, string>();
    pods.delete(uid);
    if (event !== 'delete' && found) pods.set(uid, found.image);
    if (pods.size) roles.set(role, pods);
    else roles.delete(role);
    if (roles.size) this.#byHolt.set(key, roles);
    else this.#byHolt.delete(key);
    if (this.get(holt, role) !== before && holt.name) this.#onChange(holt);
  }
}
