import { createHash } from 'node:crypto';
import type { KubeClient, KubeObject } from './kube.ts';

/**
 * cert-manager's pattern: server-side apply of the whole desired object under one field manager, sent
 * only when the live object differs from it (a hash annotation plus a subset check), so steady state
 * sends nothing. Objects whose fields Kubernetes will not change in place: immutable.ts.
 */

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
