import { createHash } from 'node:crypto';
import type { KubeClient, KubeObject } from './kube.ts';

export const FIELD_MANAGER = 'holt-operator';
/** Hash of the last applied desired object: a field we stopped sending changes it, so SSA prunes it. */
export const APPLIED_HASH = 'holt.io/applied-hash';

/** Stable JSON (sorted keys) so equal objects hash equally. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

export function hashOf(v: unknown): string {
  return createHash('sha256').update(canonical(v)).digest('hex').slice(0, 16);
}

/**
 * Whether every field of `want` has the same value in `have` (extra fields in `have` are the API
 * server's defaults or other managers' fields). Arrays must match in length, element by element.
 */
export function isSubset(want: unknown, have: unknown): boolean {
  if (want === undefined) return true;
  // Go's omitempty drops false, 0, "" and empty collections: absent equals empty.
  if (have === undefined && isEmpty(want)) return true;
  if (Array.isArray(want)) {
    if (!Array.isArray(have) || have.length !== want.length) return false;
    return want.every((w, i) => isSubset(w, have[i]));
  }
  if (want && typeof want === 'object') {
    if (!have || typeof have !== 'object' || Array.isArray(have)) return false;
    const h = have as Record<string, unknown>;
    return Object.entries(want as Record<string, unknown>).every(([k, w]) => isSubset(w, h[k]));
  }
  // The API server returns numbers we send as numbers and strings as strings; compare loosely only
  // for int-or-string fields (ports, quantities) that round-trip either way.
  return want === have || (typeof want !== typeof have && String(want) === String(have));
}

function isEmpty(v: unknown): boolean {
  if (v === false || v === 0 || v === '' || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  return typeof v === 'object' && v !== null && Object.keys(v).length === 0;
}

/** The desired object with its hash annotation (what apply sends). */
export function withHash<T extends KubeObject>(desired: T): T {
  const hash = hashOf(desired);
  return {
    ...desired,
    metadata: {
      ...desired.metadata,
      annotations: { ...desired.metadata.annotations, [APPLIED_HASH]: hash },
    },
  };
}

/** Whether `live` already is what applying `desired` would make it (then nothing is sent). */
export function upToDate(desired: KubeObject, live: KubeObject | undefined): boolean {
  if (!live) return false;
  const sent = withHash(desired);
  return (
    live.metadata.annotations?.[APPLIED_HASH] === sent.metadata.annotations?.[APPLIED_HASH] &&
    isSubset(stripMeta(sent), stripMeta(live))
  );
}

function stripMeta(o: KubeObject): Record<string, unknown> {
  const { metadata, apiVersion: _a, kind: _k, status: _s, ...rest } = o;
  return {
    ...rest,
    metadata: {
      labels: metadata.labels,
      annotations: metadata.annotations,
      ownerReferences: metadata.ownerReferences,
    },
  };
}

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

const DECIMAL: Record<string, number> = { '': 0, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };

/**
 * A Kubernetes quantity (1Gi, 500M, 1.5e9, 751619276800m) as an exact fraction: the API server
 * stores quantities in canonical form (0.7Gi comes back as 751619276800m), which floating point
 * would compare wrongly. Throws on anything that is not a quantity.
 */
export function quantityValue(q: string): { num: bigint; den: bigint } {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE]))?$/.exec(q.trim());
  if (!m || (!m[2] && !m[3])) throw new Error(`not a quantity: ${JSON.stringify(q)}`);
  const frac = m[3] ?? '';
  let num = BigInt(`${m[2] || '0'}${frac}`) * (m[1] === '-' ? -1n : 1n);
  let den = 10n ** BigInt(frac.length);
  const exp = m[4] !== undefined ? Number(m[4]) : (DECIMAL[m[5] ?? ''] ?? 0);
  if (exp >= 0) num *= 10n ** BigInt(exp);
  else den *= 10n ** BigInt(-exp);
  num *= 2n ** BigInt(BINARY[m[5] ?? ''] ?? 0);
  return { num, den };
}

/** -1, 0 or 1 as quantity `a` is below, equal to or above `b` (throws on a malformed quantity). */
function compareQuantity(a: string, b: string): number {
  const x = quantityValue(a);
  const y = quantityValue(b);
  const l = x.num * y.den;
  const r = y.num * x.den;
  return l < r ? -1 : l > r ? 1 : 0;
}

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

/**
 * Server-side apply of the complete desired object under one field manager, forced (the operator
 * is the authority for the fields it sends), but only when the live object differs: in steady
 * state this sends nothing.
 */
export async function applyIfChanged<T extends KubeObject>(
  client: KubeClient,
  desired: T,
  live: KubeObject | undefined,
  fieldManager = FIELD_MANAGER,
): Promise<{ changed: boolean; object: KubeObject }> {
  if (live && upToDate(desired, live)) return { changed: false, object: live };
  const object = await client.apply(withHash(desired), { fieldManager, force: true });
  return { changed: true, object };
}
