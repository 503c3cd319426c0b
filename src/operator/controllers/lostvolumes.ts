import type { HoltSpec } from '../../api/holt.ts';
import { isForbidden, type KubeObject } from '../kube/kube.ts';
import { STORES, storeName } from '../specs/stores.ts';
import { workspaceClaim } from '../specs/workspace.ts';
import type { ControllerContext } from './context.ts';

/**
 * A Holt's volume lost with its node. A node-bound volume (a local disk: its PersistentVolume's
 * required node affinity names the host) lives on one node; when that node is down, the pods that
 * mount it cannot run anywhere else, and Kubernetes never says so in the Holt's terms. The decision
 * is pure (lostVolumes); reading the PVCs, PVs and Nodes is readLostVolumes, at the edge.
 */

export const HOSTNAME_LABEL = 'kubernetes.io/hostname';
/** The admin's taint for a node confirmed shut down (Kubernetes' non-graceful node shutdown). */
export const OUT_OF_SERVICE_TAINT = 'node.kubernetes.io/out-of-service';

interface NodeSelectorTerm {
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
  matchFields?: { key: string; operator: string; values?: string[] }[];
}

/**
 * The nodes a PersistentVolume can be mounted on, from its required node affinity on the host name;
 * undefined when it is not bound to named nodes (a network or shared file system volume, or a zone).
 */
export function volumeNodes(pv: KubeObject | undefined): string[] | undefined {
  const spec = pv?.spec as { nodeAffinity?: { required?: { nodeSelectorTerms?: NodeSelectorTerm[] } } };
  const terms = spec?.nodeAffinity?.required?.nodeSelectorTerms ?? [];
  if (!terms.length) return undefined;
  const nodes = new Set<string>();
  // Terms are ORed: the volume is node-bound only when every term pins host names.
  for (const t of terms) {
    const pins = [
      ...(t.matchExpressions ?? []).filter((e) => e.key === HOSTNAME_LABEL),
      ...(t.matchFields ?? []).filter((e) => e.key === 'metadata.name'),
    ].filter((e) => e.operator === 'In' && e.values?.length);
    if (!pins.length) return undefined;
    for (const v of pins[0]!.values!) nodes.add(v);
  }
  return [...nodes].sort();
}

/** Why a node runs no pods (`null`: no such Node), or undefined while it is Ready or still joining. */
export function nodeDown(node: KubeObject | null): string | undefined {
  if (node === null) return 'is gone (no such Node)';
  const status = node.status as {
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
  };
  const ready = status?.conditions?.find((c) => c.type === 'Ready');
  if (!ready || ready.status === 'True') return undefined;
  const taints = (node.spec as { taints?: { key: string }[] } | undefined)?.taints ?? [];
  const since = ready.lastTransitionTime ? ` since ${ready.lastTransitionTime}` : '';
  const oos = taints.some((t) => t.key === OUT_OF_SERVICE_TAINT) ? ' (marked out-of-service)' : '';
  return `is ${ready.status === 'Unknown' ? 'unreachable' : 'NotReady'}${since}${oos}`;
}

export interface LostVolume {
  /** The PersistentVolumeClaim. */
  claim: string;
  /** The node(s) its volume is bound to. */
  node: string;
  why: string;
}

/**
 * The claims whose volume is bound to nodes that are all down. `nodes` holds what was read: a Node,
 * or null for one that does not exist; a node not in it is unknown and loses nothing.
 */
export function lostVolumes(
  claims: { claim: string; pv: KubeObject | undefined }[],
  nodes: ReadonlyMap<string, KubeObject | null>,
): LostVolume[] {
  const out: LostVolume[] = [];
  for (const { claim, pv } of claims) {
    const bound = volumeNodes(pv);
    if (!bound || bound.some((n) => !nodes.has(n))) continue;
    const why = bound.map((n) => nodeDown(nodes.get(n)!));
    if (why.every((w) => w !== undefined)) out.push({ claim, node: bound.join(','), why: why[0]! });
  }
  return out;
}

/** The Degraded message: each lost volume by PVC and node, and what brings it back. */
export function lostVolumesMessage(lost: LostVolume[]): string {
  if (!lost.length) return '';
  const each = lost.map((l) => `PVC ${l.claim} on node ${l.node}, which ${l.why}`).join('; ');
  return `volume lost with its node: ${each}. Its pods cannot run on another node: they come back when the node returns (docs/resilience.md)`;
}

/** The PVCs of a Holt's bundled stores (their StatefulSets' `data` claim) and its workspace. */
export function holtClaims(holt: string, spec: HoltSpec): string[] {
  return [
    ...STORES.filter((s) => spec.stores[s].mode === 'bundled').map((s) => `data-${storeName(holt, s)}-0`),
    workspaceClaim(holt),
  ];
}

/**
 * Reads the Holt's bound PVCs (cache), their PVs and nodes (get by name: the chart grants get on
 * persistentvolumes and nodes, nothing more). Without that grant nothing is reported lost.
 */
export async function readLostVolumes(
  ctx: ControllerContext,
  namespace: string,
  holt: string,
  spec: HoltSpec,
): Promise<LostVolume[]> {
  try {
    const claims: { claim: string; pv: KubeObject | undefined }[] = [];
    const nodes = new Map<string, KubeObject | null>();
    for (const claim of holtClaims(holt, spec)) {
      const pvc = ctx.cache.get('PersistentVolumeClaim', namespace, claim);
      const volume = (pvc?.spec as { volumeName?: string } | undefined)?.volumeName;
      if (!volume) continue;
      const pv = await ctx.client.get('PersistentVolume', undefined, volume);
      claims.push({ claim, pv });
      for (const n of volumeNodes(pv) ?? [])
        if (!nodes.has(n)) nodes.set(n, (await ctx.client.get('Node', undefined, n)) ?? null);
    }
    return lostVolumes(claims, nodes);
  } catch (e) {
    if (!isForbidden(e)) throw e;
    ctx.log.debug({ holt, namespace }, 'lost volumes not checked: no get on persistentvolumes or nodes');
    return [];
  }
}
