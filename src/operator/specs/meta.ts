import type { KubeObject, ObjectMeta, OwnerReference } from '../kube/kube.ts';

export const MANAGED_BY = 'holt-operator';
/** Selects every object the operator manages (informers of owned kinds watch only these). */
export const MANAGED_SELECTOR = `app.kubernetes.io/managed-by=${MANAGED_BY}`;

/** The primary resource an object belongs to (what its owner reference points at). */
export interface Owner {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid: string;
}

export function ownerOf(o: KubeObject): Owner {
  return {
    apiVersion: o.apiVersion,
    kind: o.kind,
    name: o.metadata.name,
    namespace: o.metadata.namespace ?? 'default',
    uid: o.metadata.uid ?? '',
  };
}

export function ownerRef(o: Owner): OwnerReference {
  return {
    apiVersion: o.apiVersion,
    kind: o.kind,
    name: o.name,
    uid: o.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Labels that select one workload's pods (immutable once a Deployment/StatefulSet exists). */
export function selectorLabels(name: string, component: string): Record<string, string> {
  return { 'app.kubernetes.io/instance': name, 'app.kubernetes.io/component': component };
}

/** The recommended app.kubernetes.io labels plus holt.io/instance and, for agents, holt.io/role. */
export function labels(
  holt: string,
  name: string,
  component: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    'app.kubernetes.io/name': `holt-${component}`,
    ...selectorLabels(name, component),
    'app.kubernetes.io/part-of': 'holt',
    'app.kubernetes.io/managed-by': MANAGED_BY,
    'holt.io/instance': holt,
    ...extra,
  };
}

export function meta(
  name: string,
  owner: Owner,
  lbls: Record<string, string>,
  annotations?: Record<string, string>,
): ObjectMeta {
  return {
    name,
    namespace: owner.namespace,
    labels: lbls,
    ...(annotations ? { annotations } : {}),
    ownerReferences: [ownerRef(owner)],
  };
}

/** A DNS-1123 name of at most 63 characters: long names keep a hash suffix so they stay unique. */
export function childName(...parts: string[]): string {
  const s = parts
    .join('-')
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-');
  if (s.length <= 63) return s;
  let h = 0;
  for (const c of s) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `${s.slice(0, 54).replace(/-+$/, '')}-${h.toString(36).slice(0, 8)}`;
}
