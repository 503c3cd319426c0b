import { isSubset } from './apply.ts';
import type { KubeObject } from './kube.ts';
import { compareQuantity } from './quantity.ts';

/**
 * Fields Kubernetes will not change in place, so applying a new value fails with 422 for ever: a
 * Deployment's selector (the object is replaced) and a StatefulSet's claim templates (PVCs are grown
 * around it, or the change is refused). Pure decisions; the controllers carry them out.
 */

const selectorOf = (o: KubeObject) => (o.spec as { selector?: unknown } | undefined)?.selector;
const controllerOf = (o: KubeObject) => o.metadata.ownerReferences?.find((r) => r.controller)?.uid;
const showSelector = (sel: unknown) =>
  Object.entries((sel as { matchLabels?: Record<string, string> } | undefined)?.matchLabels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .sort()
    .join(',');

/**
 * Why `live` must be deleted and re-created instead of applied (undefined: apply as usual). A
 * Deployment's spec.selector is immutable, so applying a changed one fails with 422 forever.
 * Only Deployments are replaced (a StatefulSet's PVCs, retention whenDeleted: Delete, would go with
 * it), and only one with the desired object's controller owner (never someone else's object).
 */
export function replaceReason(desired: KubeObject, live: KubeObject | undefined): string | undefined {
  if (!live || desired.kind !== 'Deployment' || live.kind !== desired.kind) return undefined;
  if (!controllerOf(desired) || controllerOf(live) !== controllerOf(desired)) return undefined;
  const want = selectorOf(desired);
  const have = selectorOf(live);
  if (want === undefined || (isSubset(want, have) && isSubset(have, want))) return undefined;
  return `spec.selector changed (${showSelector(have)} → ${showSelector(want)})`;
}

type ClaimTemplate = {
  metadata?: { name?: string };
  spec?: { storageClassName?: string; resources?: { requests?: { storage?: string } }; [k: string]: unknown };
};
const claimTemplates = (o: KubeObject) =>
  (o.spec as { volumeClaimTemplates?: ClaimTemplate[] } | undefined)?.volumeClaimTemplates ?? [];

/** The PVC size changes a StatefulSet's claim templates ask for, or why they cannot be made. */
export type StorageChange = { grow: { template: string; from: string; to: string }[] } | { refused: string };

/**
 * How the storage of one of our StatefulSets changed (undefined: it did not). Claim templates are
 * immutable, so applying a new size fails with 422 forever. A bigger size is carried out by resizing
 * the PVCs and re-creating the StatefulSet around its running pods; a smaller one or another storage
 * class cannot be (a PVC never shrinks, and moving data is not the operator's to do).
 */
export function storageChange(desired: KubeObject, live: KubeObject | undefined): StorageChange | undefined {
  if (!live || desired.kind !== 'StatefulSet' || live.kind !== desired.kind) return undefined;
  if (!controllerOf(desired) || controllerOf(live) !== controllerOf(desired)) return undefined;
  const have = new Map(claimTemplates(live).map((t) => [t.metadata?.name ?? '', t]));
  const grow: { template: string; from: string; to: string }[] = [];
  for (const t of claimTemplates(desired)) {
    const name = t.metadata?.name ?? '';
    const old = have.get(name);
    if (!old) continue;
    const [oldClass, newClass] = [old.spec?.storageClassName ?? '', t.spec?.storageClassName ?? ''];
    if (oldClass !== newClass)
      return {
        refused: `volume ${name}: storageClassName cannot change (${oldClass || 'default'} → ${newClass || 'default'})`,
      };
    const from = old.spec?.resources?.requests?.storage;
    const to = t.spec?.resources?.requests?.storage;
    if (!from || !to || from === to) continue;
    let cmp: number;
    try {
      cmp = compareQuantity(to, from);
    } catch {
      return { refused: `volume ${name}: storage ${JSON.stringify(to)} is not a quantity (such as 1Gi)` };
    }
    if (cmp < 0)
      return { refused: `volume ${name}: storage cannot shrink (${from} → ${to}); PVCs only grow` };
    if (cmp > 0) grow.push({ template: name, from, to });
  }
  return grow.length ? { grow } : undefined;
}

/** `desired` with each claim template's size and class as `live` has them (they cannot change). */
export function withClaimTemplatesOf(desired: KubeObject, live: KubeObject): KubeObject {
  const have = new Map(claimTemplates(live).map((t) => [t.metadata?.name, t.spec ?? {}]));
  const volumeClaimTemplates = claimTemplates(desired).map((t) => {
    const old = have.get(t.metadata?.name);
    if (!old) return t;
    const { storageClassName: _, ...spec } = t.spec ?? {};
    return {
      ...t,
      spec: {
        ...spec,
        ...(old.storageClassName !== undefined ? { storageClassName: old.storageClassName } : {}),
        resources: old.resources,
      },
    };
  });
  return { ...desired, spec: { ...(desired.spec as object), volumeClaimTemplates } };
}
