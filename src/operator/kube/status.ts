import type { Condition } from '../../api/status.ts';
import { FIELD_MANAGER, isSubset } from './apply.ts';
import { isNotFound, type KubeClient, type KubeObject } from './kube.ts';

// metav1.Condition: the one definition is the status schema's (src/api/status.ts).
export type { Condition };

export type ConditionInput = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

/** RFC 3339 in whole seconds, as metav1.Time serialises. */
export const nowIso = (now = Date.now()) => new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z');

/**
 * The new condition list: each input condition with the generation it describes; the transition
 * time moves only when the status flips (so an unchanged world yields an identical list).
 */
export function setConditions(
  previous: readonly Condition[] | undefined,
  inputs: readonly ConditionInput[],
  generation: number | undefined,
  now = Date.now(),
): Condition[] {
  const prev = new Map((previous ?? []).map((c) => [c.type, c]));
  const out: Condition[] = inputs.map((c) => {
    const p = prev.get(c.type);
    return {
      ...c,
      observedGeneration: generation,
      lastTransitionTime: p && p.status === c.status ? p.lastTransitionTime : nowIso(now),
    };
  });
  // Conditions someone else added (another controller) are kept as they are.
  for (const p of previous ?? []) if (!inputs.some((c) => c.type === p.type)) out.push(p);
  return out;
}

export function condition(type: string, ok: boolean, reason: string, message: string): ConditionInput {
  return { type, status: ok ? 'True' : 'False', reason, message };
}

/**
 * Writes status through the /status subresource with SSA (only name, namespace and status are
 * sent, as cert-manager does), skipping the write when the live status already has these values.
 */
export async function writeStatus(
  client: KubeClient,
  obj: KubeObject,
  status: Record<string, unknown>,
  fieldManager = FIELD_MANAGER,
): Promise<boolean> {
  const live = (obj.status ?? {}) as Record<string, unknown>;
  if (isSubset(status, live)) return false;
  await client
    .apply(
      {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        metadata: { name: obj.metadata.name, namespace: obj.metadata.namespace },
        status,
      },
      { fieldManager, force: true, subresource: 'status' },
    )
    // Deleted meanwhile: there is no status left to write.
    .catch((e: unknown) => {
      if (!isNotFound(e)) throw e;
    });
  return true;
}
