import { errorMessage } from '../../common/errors.ts';
import type { Logger } from '../../common/logger.ts';
import type { BacklogReader, ClaimSource } from '../autoscale/backlog.ts';
import { applyIfChanged } from '../kube/apply.ts';
import type { Cache } from '../kube/cache.ts';
import type { EventRecorder } from '../kube/events.ts';
import { replaceReason, type StorageChange, storageChange, withClaimTemplatesOf } from '../kube/immutable.ts';
import { isConflict, isNotFound, type KubeClient, type KubeObject } from '../kube/kube.ts';
import { type Condition, condition, setConditions, writeStatus } from '../kube/status.ts';
import type { NetworkSettings } from '../specs/networkpolicy.ts';
import type { HoltFiguresReader } from './agentfigures.ts';
import type { RegistrySync } from './registry.ts';

/** What every reconciler gets injected. */
export interface ControllerContext {
  client: KubeClient;
  cache: Cache;
  events: EventRecorder;
  log: Logger;
  runtimeImage: string;
  registry: RegistrySync;
  /** Pending claims of fresh_per_call agents (one Job each); without it no claim Jobs are made. */
  claims?: ClaimSource;
  backlog?: BacklogReader;
  /** Re-check interval for what the operator polls (claim Jobs past a lost doorbell, unreachable stores). */
  pollMs: number;
  /** Claims in flight and budget use of each Agent, from its Holt's Redis; without it neither is reported. */
  runtime?: HoltFiguresReader;
  /** How often an Agent's runtime values are re-read (they change without a Kubernetes event). */
  statusPollMs: number;
  /** The operator's namespace and the cluster's CIDRs, for the NetworkPolicies. */
  network: NetworkSettings;
  /** How often a ToolServer's tools are read again (default 60 s). */
  toolServerRefreshMs?: number;
  /** Resolves a trace collector's Service name the operator may not read (default: its own DNS). */
  resolveHost?: (host: string) => Promise<string>;
}

export interface ChildrenResult {
  created: string[];
  updated: string[];
  deleted: string[];
  /** Deleted to be re-created (an immutable field changed), each with why; created on a later reconcile. */
  replaced: string[];
  /** StatefulSets whose PVCs were grown, each with how; re-created around their pods on a later reconcile. */
  grown: string[];
  errors: string[];
}

const label = (o: KubeObject) => `${o.kind}/${o.metadata.name}`;
type Outcome =
  | 'created'
  | 'updated'
  | 'unchanged'
  | { replaced: string }
  | { grown: string }
  | { error: string };

/**
 * Converges an owner's children: applies each desired object that differs from the cache (SSA),
 * deletes owned objects of `pruneKinds` that are no longer desired, and deletes a child whose
 * immutable selector must change (see replaceReason): its delete event requeues the owner, whose
 * next reconcile, with the old object gone from the cache, creates the new one. Errors are
 * collected per object so one bad child does not block the others.
 */
export async function applyChildren(
  ctx: ControllerContext,
  ownerUid: string,
  namespace: string,
  desired: KubeObject[],
  pruneKinds: readonly string[],
): Promise<ChildrenResult> {
  const res: ChildrenResult = { created: [], updated: [], deleted: [], replaced: [], grown: [], errors: [] };
  // Applied in parallel, reported in the order of `desired`: the lists end up in status messages
  // and event notes, which must not change with the order the API server happened to answer in
  // (a reordered message is a status write, whose watch event requeues the owner at once).
  const outcomes = await Promise.all(
    desired.map(async (d): Promise<Outcome> => {
      const live = ctx.cache.get(d.kind, namespace, d.metadata.name);
      try {
        const storage = storageChange(d, live);
        if (storage && live) return await changeStorage(ctx, namespace, d, live, storage);
        const why = replaceReason(d, live);
        if (why && live) {
          // The uid precondition deletes only the object compared; a 409: a newer one already has the name.
          if (!live.metadata.deletionTimestamp)
            await ctx.client.delete(d.kind, namespace, d.metadata.name, live.metadata.uid).catch((e) => {
              if (!isConflict(e)) throw e;
            });
          return { replaced: why };
        }
        const r = await applyIfChanged(ctx.client, d, live);
        return !r.changed ? 'unchanged' : live ? 'updated' : 'created';
      } catch (e) {
        return { error: `${label(d)}: ${errorMessage(e)}` };
      }
    }),
  );
  outcomes.forEach((o, i) => {
    const d = desired[i] as KubeObject;
    if (o === 'created') res.created.push(label(d));
    else if (o === 'updated') res.updated.push(label(d));
    else if (o === 'unchanged') return;
    else if ('replaced' in o) res.replaced.push(`${label(d)}: ${o.replaced}`);
    else if ('grown' in o) res.grown.push(`${label(d)}: ${o.grown}`);
    else res.errors.push(o.error);
  });
  const want = new Set(desired.map(label));
  for (const kind of pruneKinds) {
    for (const o of ctx.cache.owned(kind, namespace, ownerUid)) {
      if (want.has(label(o)) || o.metadata.deletionTimestamp) continue;
      try {
        await ctx.client.delete(kind, namespace, o.metadata.name, o.metadata.uid);
        res.deleted.push(label(o));
      } catch (e) {
        if (!isNotFound(e)) res.errors.push(`delete ${label(o)}: ${String(e)}`);
      }
    }
  }
  return res;
}

/**
 * A StatefulSet whose PVC size or class changed. A bigger size: each existing PVC is resized, then the
 * StatefulSet is deleted with its pods orphaned, to be re-created with the new claim template on the
 * next reconcile (the new one adopts the running pods, whose template did not change). A size or class
 * that cannot be had (smaller, another class, a StorageClass without expansion): reported, and the
 * rest of the StatefulSet still applied with its claim templates as they are, so nothing else is held
 * up and going back to the old size is always possible.
 */
async function changeStorage(
  ctx: ControllerContext,
  namespace: string,
  desired: KubeObject,
  live: KubeObject,
  change: StorageChange,
): Promise<Outcome> {
  // Being deleted to be re-created: the next reconcile after it is gone makes the new one.
  if (live.metadata.deletionTimestamp) return 'unchanged';
  let problem: string;
  if ('grow' in change) {
    try {
      return { grown: await growStorage(ctx, namespace, desired, live, change.grow) };
    } catch (e) {
      problem = `storage not grown: ${errorMessage(e)}`;
    }
  } else problem = change.refused;
  await applyIfChanged(ctx.client, withClaimTemplatesOf(desired, live), live);
  return { error: `${label(desired)}: ${problem}` };
}

async function growStorage(
  ctx: ControllerContext,
  namespace: string,
  desired: KubeObject,
  live: KubeObject,
  grow: Extract<StorageChange, { grow: unknown }>['grow'],
): Promise<string> {
  const sts = live.metadata.name;
  const replicasOf = (o: KubeObject) => (o.spec as { replicas?: number } | undefined)?.replicas ?? 1;
  // Ordinals that may have a PVC, even if scaled in since (whenScaled: Retain keeps them).
  const ordinals = Math.max(1, replicasOf(live), replicasOf(desired));
  for (const g of grow) {
    for (let i = 0; i < ordinals; i++) {
      const pvc = `${g.template}-${sts}-${i}`;
      await ctx.client
        .mergePatch('PersistentVolumeClaim', namespace, pvc, {
          spec: { resources: { requests: { storage: g.to } } },
        })
        .catch((e) => {
          if (!isNotFound(e)) throw e; // not made yet: it will be made at the new size
        });
    }
  }
  await ctx.client.delete('StatefulSet', namespace, sts, live.metadata.uid, 'Orphan').catch((e) => {
    if (!isConflict(e)) throw e;
  });
  const sizes = grow.map((g) => `${g.template} ${g.from} → ${g.to}`).join(', ');
  return `storage ${sizes}: PVCs resized, StatefulSet re-created around its running pods`;
}

type WorkloadStatus = {
  observedGeneration?: number;
  replicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  updatedReplicas?: number;
  currentRevision?: string;
  updateRevision?: string;
};

/** Readiness of a Deployment or StatefulSet from its status fields (what the controllers report). */
export function workloadReady(o: KubeObject | undefined): {
  ready: boolean;
  readyReplicas: number;
  reason: string;
} {
  if (!o) return { ready: false, readyReplicas: 0, reason: 'NotCreated' };
  const want = ((o.spec as { replicas?: number } | undefined)?.replicas ?? 1) as number;
  const s = (o.status ?? {}) as WorkloadStatus;
  const readyReplicas = s.readyReplicas ?? 0;
  if ((s.observedGeneration ?? 0) < (o.metadata.generation ?? 0))
    return { ready: false, readyReplicas, reason: 'RolloutPending' };
  if (o.kind === 'StatefulSet' && s.updateRevision && s.currentRevision !== s.updateRevision)
    return { ready: false, readyReplicas, reason: 'RollingUpdate' };
  if ((s.updatedReplicas ?? 0) < want) return { ready: false, readyReplicas, reason: 'RollingUpdate' };
  if (readyReplicas < want) return { ready: false, readyReplicas, reason: 'PodsNotReady' };
  return { ready: true, readyReplicas, reason: 'Ready' };
}

/** A Job's outcome from its status. */
export function jobState(o: KubeObject | undefined): 'missing' | 'running' | 'succeeded' | 'failed' {
  if (!o) return 'missing';
  const s = (o.status ?? {}) as { succeeded?: number; conditions?: { type: string; status: string }[] };
  if ((s.succeeded ?? 0) > 0 || s.conditions?.some((c) => c.type === 'Complete' && c.status === 'True'))
    return 'succeeded';
  if (s.conditions?.some((c) => c.type === 'Failed' && c.status === 'True')) return 'failed';
  return 'running';
}

export function conditionTrue(o: KubeObject | undefined, type: string): boolean {
  const cs = (o?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions;
  return cs?.some((c) => c.type === type && c.status === 'True') ?? false;
}

/**
 * The status writer of an Agent or WorkerPool: Ready / Progressing / Degraded from one (phase, ready,
 * reason, message), written only when something changed, and an Event when readiness flips or a new
 * reason degrades it. `phase` only names the mix (Degraded and Failed degrade).
 */
export function readinessReporter(
  ctx: ControllerContext,
  obj: KubeObject,
  base: Record<string, unknown> = {},
) {
  const gen = obj.metadata.generation;
  const prev = ((obj.status ?? {}) as { conditions?: Condition[] }).conditions;
  const prevReady = prev?.find((c) => c.type === 'Ready');
  return async (
    phase: string,
    ready: boolean,
    reason: string,
    message: string,
    extra: Record<string, unknown> = {},
  ): Promise<void> => {
    const degraded = phase === 'Degraded' || phase === 'Failed';
    await writeStatus(ctx.client, obj, {
      observedGeneration: gen,
      ...base,
      ...extra,
      conditions: setConditions(
        prev,
        [
          condition('Ready', ready, reason, message),
          condition('Progressing', !ready && !degraded, ready ? 'Stable' : reason, message),
          condition('Degraded', degraded, degraded ? reason : 'NoErrors', degraded ? message : 'no errors'),
        ],
        gen,
      ),
    });
    // A new object's first, not-yet-ready status is no news (its Created event said as much): at 1 000
    // Holts that event was one write in ten. Becoming Ready, losing it and degrading are.
    const firstProgress = prevReady === undefined && !ready && !degraded;
    if (
      !firstProgress &&
      (prevReady?.status !== (ready ? 'True' : 'False') || (degraded && prevReady?.reason !== reason))
    )
      ctx.events.emit(obj, degraded ? 'Warning' : 'Normal', ready ? 'Ready' : reason, 'Reconcile', message);
  };
}
