import { newPassword } from '../../access/principals.ts';
import type { HoltSpec } from '../../api/holt.ts';
import { errorMessage } from '../../common/errors.ts';
import { isConflict, type KubeObject } from '../kube/kube.ts';
import type { ReconcileResult } from '../kube/queue.ts';
import {
  type Condition,
  type ConditionInput,
  condition,
  setConditions,
  writeStatus,
} from '../kube/status.ts';
import { bundledStore } from '../specs/bundled.ts';
import {
  consoleTokens,
  INGRESS_TOKENS_DIR,
  ingressNetworkPolicy,
  ingressTokensSecretName,
} from '../specs/ingress.ts';
import { type Owner, ownerOf } from '../specs/meta.ts';
import { migrationJob } from '../specs/migration.ts';
import { type NetworkSettings, networkPolicies } from '../specs/networkpolicy.ts';
import { orchestratorDeployment, orchestratorName, orchestratorService } from '../specs/orchestrator.ts';
import { HEALTH_PORT } from '../specs/pod.ts';
import { serviceAccounts } from '../specs/serviceaccount.ts';
import {
  missingSecretKeys,
  STORE_PORTS,
  STORES,
  type StoreKind,
  storeName,
  storeProblems,
  storeSecret,
  storeSecretName,
} from '../specs/stores.ts';
import { toolSecretName } from '../specs/tool-secrets.ts';
import { workspacePvc, workspaceSeedJob } from '../specs/workspace.ts';
import { applyChildren, type ControllerContext, conditionTrue, jobState, workloadReady } from './context.ts';
import { type HoltDataStatus, readHoltData } from './holtdata.ts';
import { holtIngress, syncIngressExposure, syncIngressTokens } from './ingress.ts';
import { lostVolumesMessage, readLostVolumes } from './lostvolumes.ts';
import { syncPodMonitor } from './monitoring.ts';
import { holtOf, parseHolt, splitKey } from './resources.ts';
import { holtNatsTools, pruneToolSecrets, syncToolSecrets } from './toolsecrets.ts';

/** Kinds a Holt owns that are deleted when no longer desired (never PVCs: they hold data). */
export const HOLT_PRUNE_KINDS = [
  'Deployment',
  'StatefulSet',
  'Service',
  'ServiceAccount',
  'PodDisruptionBudget',
  'NetworkPolicy',
  'Job',
] as const;

const STORE_CONDITION: Record<StoreKind, string> = {
  redis: 'RedisReady',
  nats: 'NatsReady',
  postgres: 'PostgresReady',
};

/**
 * Every object a Holt owns, built by the pure spec builders (Secrets apart: created once). `ingress`:
 * an Agent of the Holt enables spec.ingress or the Holt its console, so the orchestrator serves the
 * ingress port.
 * `natsTools`: the asynchronous NATS tools whose users the bundled NATS has (tool-secrets.ts).
 */
export function holtChildren(
  owner: Owner,
  spec: HoltSpec,
  runtimeImage: string,
  network: NetworkSettings,
  ingress = false,
  natsTools: string[] = [],
): KubeObject[] {
  return [
    ...serviceAccounts(owner),
    workspacePvc(owner, spec.workspace),
    ...STORES.filter((s) => spec.stores[s].mode === 'bundled').flatMap((s) =>
      bundledStore(owner, s, spec.stores[s], spec.stores.tls, s === 'nats' ? natsTools : []),
    ),
    migrationJob(owner, spec, runtimeImage),
    ...[workspaceSeedJob(owner, spec, runtimeImage)].filter((j) => j !== undefined),
    orchestratorDeployment(
      owner,
      spec,
      runtimeImage,
      ingress ? { tokensSecret: ingressTokensSecretName(owner.name), dir: INGRESS_TOKENS_DIR } : undefined,
    ),
    orchestratorService(owner, ingress),
    ...networkPolicies(owner, spec, network),
    ...(ingress ? [ingressNetworkPolicy(owner, spec)] : []),
  ];
}

async function ensureSecrets(ctx: ControllerContext, owner: Owner, spec: HoltSpec): Promise<string[]> {
  const created: string[] = [];
  for (const s of STORES) {
    const name = storeSecretName(owner.name, s);
    const live = await ctx.client.get('Secret', owner.namespace, name);
    if (spec.stores[s].mode === 'bundled' && !live) {
      try {
        await ctx.client.create(storeSecret(owner, s, newPassword));
        created.push(`Secret/${name}`);
      } catch (e) {
        // 409: created by an earlier run our cache has not seen yet; keep that one.
        if (!isConflict(e)) throw e;
      }
    } else if (spec.stores[s].mode === 'bundled' && live) {
      // Made by an older operator: add the per-principal users' keys, keep every key it has.
      const missing = missingSecretKeys(
        owner,
        s,
        live.data as Record<string, string> | undefined,
        newPassword,
      );
      if (Object.keys(missing).length) {
        await ctx.client.mergePatch('Secret', owner.namespace, name, { stringData: missing });
        created.push(`Secret/${name} (keys ${Object.keys(missing).sort().join(', ')})`);
      }
    } else if (
      spec.stores[s].mode === 'external' &&
      live?.metadata.ownerReferences?.some((r) => r.uid === owner.uid)
    ) {
      await ctx.client.delete('Secret', owner.namespace, name, live.metadata.uid);
    }
  }
  return created;
}

function storeEndpoints(owner: Owner, spec: HoltSpec): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of STORES) {
    out[s] =
      spec.stores[s].mode === 'bundled'
        ? `${storeName(owner.name, s)}.${owner.namespace}.svc:${STORE_PORTS[s]}`
        : 'external';
  }
  out.orchestrator = `${orchestratorName(owner.name)}.${owner.namespace}.svc:${HEALTH_PORT}`;
  return out;
}

/** Level-triggered reconcile of one Holt: children, registry, status. */
export async function reconcileHolt(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  const [ns, name] = splitKey(key);
  const holt = ctx.cache.get('Holt', ns, name);
  if (!holt) {
    // Deleted: the garbage collector removes the children through their owner references.
    ctx.registry.forget({ namespace: ns, name });
    return undefined;
  }
  if (holt.metadata.deletionTimestamp) return undefined;
  const owner = ownerOf(holt);
  const gen = holt.metadata.generation;
  const prev = (holt.status ?? {}) as { phase?: string; conditions?: Condition[]; data?: HoltDataStatus };
  const parsed = parseHolt(holt);
  const invalid = parsed.ok ? storeProblems(parsed.spec.stores).join('; ') : parsed.error;
  if (!parsed.ok || invalid) {
    ctx.events.emit(holt, 'Warning', 'InvalidSpec', 'Validate', invalid);
    await writeStatus(ctx.client, holt, {
      phase: 'Degraded',
      observedGeneration: gen,
      conditions: setConditions(
        prev.conditions,
        [
          condition('Ready', false, 'InvalidSpec', invalid),
          condition('Progressing', false, 'InvalidSpec', 'waiting for a valid spec'),
          condition('Degraded', true, 'InvalidSpec', invalid),
        ],
        gen,
      ),
    });
    return undefined;
  }
  const spec = parsed.spec;
  const errors: string[] = [];
  const secrets = await ensureSecrets(ctx, owner, spec).catch((e: unknown) => {
    errors.push(String(e));
    return [] as string[];
  });
  // Living agents' ingress: their tokens' Secrets and the hashed file before the orchestrator mounts it.
  // The ingress port is served for living agents' ingress, or for the console.
  const ingress = holtIngress(ctx, ns, name);
  const serving = ingress.serving || spec.ingress.console.enabled;
  const tokens = await syncIngressTokens(ctx, owner, ingress.tokens, consoleTokens(name, spec)).catch(
    (e: unknown) => {
      errors.push(`ingress tokens: ${errorMessage(e)}`);
      return { present: [], missing: [], created: [] as string[] };
    },
  );
  if (tokens.missing.length)
    ctx.events.emit(
      holt,
      'Warning',
      'IngressTokenMissing',
      'Apply',
      `no token in Secret(s) ${tokens.missing.map((t) => t.secretName).join(', ')} (key token): those tokens admit nothing`,
    );
  // Per-tool NATS credentials: their Secrets before the NATS that reads them. On a failure NATS keeps
  // the tools whose Secrets it already reads, so it never restarts onto a missing Secret.
  const wanted = spec.stores.nats.mode === 'bundled' ? holtNatsTools(ctx, ns, name) : [];
  const toolSync = await syncToolSecrets(ctx, owner, spec, wanted).catch((e: unknown) => {
    errors.push(`tool credentials: ${errorMessage(e)}`);
    return undefined;
  });
  const had = toolSync?.had ?? [];
  const natsTools = toolSync ? wanted : wanted.filter((t) => had.includes(toolSecretName(name, t)));
  const res = await applyChildren(
    ctx,
    owner.uid,
    ns,
    holtChildren(owner, spec, ctx.runtimeImage, ctx.network, serving, natsTools),
    HOLT_PRUNE_KINDS,
  );
  errors.push(...res.errors);
  const pruned =
    toolSync && !res.errors.length
      ? await pruneToolSecrets(ctx, owner, had, natsTools).catch((e: unknown) => {
          errors.push(`tool credentials: ${errorMessage(e)}`);
          return [] as string[];
        })
      : [];
  if (pruned.length) ctx.events.emit(holt, 'Normal', 'Pruned', 'Apply', `deleted ${pruned.join(', ')}`);
  const created = [...secrets, ...tokens.created, ...(toolSync?.created ?? []), ...res.created];
  if (created.length) ctx.events.emit(holt, 'Normal', 'Created', 'Apply', `created ${created.join(', ')}`);
  if (res.updated.length)
    ctx.events.emit(holt, 'Normal', 'Updated', 'Apply', `updated ${res.updated.join(', ')}`);
  if (res.deleted.length)
    ctx.events.emit(holt, 'Normal', 'Pruned', 'Apply', `deleted ${res.deleted.join(', ')}`);
  if (res.grown.length) ctx.events.emit(holt, 'Normal', 'StorageGrown', 'Apply', res.grown.join('; '));
  if (res.errors.length) ctx.events.emit(holt, 'Warning', 'ApplyFailed', 'Apply', res.errors.join('; '));

  // Component conditions from the observed state of what we own.
  const comps: ConditionInput[] = [];
  for (const s of STORES) {
    if (spec.stores[s].mode === 'external') {
      comps.push(condition(STORE_CONDITION[s], true, 'External', 'external store'));
      continue;
    }
    const w = workloadReady(ctx.cache.get('StatefulSet', ns, storeName(name, s)));
    comps.push(condition(STORE_CONDITION[s], w.ready, w.reason, `${w.readyReplicas}/1 ready`));
  }

  let registryError: string | undefined;
  let registryAgents = 0;
  // A bundled Redis that is still starting is not an error: the registry waits for it (its
  // StatefulSet becoming ready brings the next reconcile). An external one counts as ready.
  const redisStarting = comps.find((c) => c.type === STORE_CONDITION.redis)?.status !== 'True';
  if (!redisStarting)
    try {
      registryAgents = (await ctx.registry.sync({ namespace: ns, name })).agents;
    } catch (e) {
      registryError = errorMessage(e);
      ctx.events.emit(
        holt,
        'Warning',
        'RegistryUnavailable',
        'SyncRegistry',
        'cannot write the agent registry to Redis',
      );
    }

  let monitoring: ConditionInput | undefined;
  try {
    monitoring = await syncPodMonitor(ctx, owner, spec);
  } catch (e) {
    errors.push(`PodMonitor: ${errorMessage(e)}`);
  }
  let exposed: ConditionInput | undefined;
  try {
    exposed = await syncIngressExposure(ctx, owner, spec, serving);
  } catch (e) {
    errors.push(`ingress exposure: ${errorMessage(e)}`);
  }
  const wasMonitoring = prev.conditions?.find((c) => c.type === 'MonitoringReady');
  if (monitoring?.status === 'False' && wasMonitoring?.reason !== monitoring.reason)
    ctx.events.emit(holt, 'Warning', monitoring.reason, 'Apply', monitoring.message);

  const migration = ctx.cache
    .owned('Job', ns, owner.uid)
    .find((j) => j.metadata.labels?.['app.kubernetes.io/component'] === 'migration');
  const mstate = jobState(migration);
  comps.push(
    condition(
      'MigrationsComplete',
      mstate === 'succeeded',
      mstate === 'succeeded' ? 'Succeeded' : mstate === 'failed' ? 'Failed' : 'Running',
      `migration job ${mstate}`,
    ),
  );
  const seed = ctx.cache
    .owned('Job', ns, owner.uid)
    .find((j) => j.metadata.labels?.['app.kubernetes.io/component'] === 'workspace-seed');
  const sstate = spec.workspace.gitUrl ? jobState(seed) : undefined;
  if (sstate)
    comps.push(
      condition(
        'WorkspaceSeeded',
        sstate === 'succeeded',
        sstate === 'succeeded' ? 'Cloned' : sstate === 'failed' ? 'CloneFailed' : 'Cloning',
        sstate === 'failed'
          ? "the workspace could not be cloned from gitUrl: see the seed Job's logs"
          : `workspace seed job ${sstate}`,
      ),
    );
  const orch = workloadReady(ctx.cache.get('Deployment', ns, orchestratorName(name)));
  comps.push(
    condition(
      'OrchestratorReady',
      orch.ready,
      orch.reason,
      `${orch.readyReplicas}/${spec.orchestrator.replicas} ready`,
    ),
  );
  comps.push(
    registryError
      ? condition(
          'RegistrySynced',
          false,
          'RedisUnavailable',
          'the agent registry could not be written; retrying',
        )
      : redisStarting
        ? condition('RegistrySynced', false, 'WaitingForRedis', 'written once Redis is ready')
        : condition('RegistrySynced', true, 'Synced', `${registryAgents} agents registered`),
  );

  const data = await readHoltData(ctx, ns, name, prev.data);
  const more = (data?.quarantined ?? 0) - (prev.data?.quarantined ?? 0);
  if (more > 0)
    ctx.events.emit(
      holt,
      'Warning',
      'DataQuarantined',
      'ReadStatus',
      `${more} more stored item(s) set aside as malformed or not allowed (${data?.quarantined} in all): run holt status to list them`,
    );

  // Ready means a workflow can start now: every Agent's pup is up and bidding (its Ready), so the
  // first claim made after `kubectl wait` is never closed while an agent is still starting.
  const agents = ctx.cache
    .list('Agent', ns)
    .filter((a) => holtOf(a) === name && !a.metadata.deletionTimestamp);
  const agentsReady = agents.filter((a) => conditionTrue(a, 'Ready')).length;
  const agentsWaiting = agents
    .filter((a) => !conditionTrue(a, 'Ready'))
    .map((a) => a.metadata.name)
    .sort();
  comps.push(
    condition(
      'AgentsReady',
      agentsWaiting.length === 0,
      agentsWaiting.length === 0 ? 'AllAgentsReady' : 'AgentsNotReady',
      agentsWaiting.length === 0
        ? `${agents.length} agents ready`
        : `${agentsReady}/${agents.length} agents ready; waiting for ${agentsWaiting.slice(0, 10).join(', ')}`,
    ),
  );
  const notReady = comps.filter((c) => c.status !== 'True').map((c) => c.type);
  // A component down may be a volume whose node is down: only then are PVs and Nodes read.
  const lost = notReady.length
    ? await readLostVolumes(ctx, ns, name, spec).catch((e: unknown) => {
        errors.push(`lost volumes: ${errorMessage(e)}`);
        return [];
      })
    : [];
  const degraded =
    errors.length > 0 ||
    registryError !== undefined ||
    mstate === 'failed' ||
    sstate === 'failed' ||
    lost.length > 0;
  const ready = !degraded && notReady.length === 0;
  const phase = degraded ? 'Degraded' : ready ? 'Ready' : 'Progressing';
  const degradedMsg = [
    ...errors,
    ...(registryError ? ['agent registry unavailable'] : []),
    ...(mstate === 'failed' ? ['migration failed'] : []),
    ...(sstate === 'failed' ? ['workspace clone failed'] : []),
    ...(lost.length ? [lostVolumesMessage(lost)] : []),
  ].join('; ');
  const conditions = setConditions(
    prev.conditions,
    [
      condition(
        'Ready',
        ready,
        ready ? 'AllComponentsReady' : 'ComponentsNotReady',
        ready ? 'all components ready' : `waiting for ${notReady.join(', ') || 'recovery'}`,
      ),
      condition(
        'Progressing',
        !ready && !degraded,
        ready ? 'Stable' : degraded ? 'Degraded' : 'Reconciling',
        ready
          ? 'up to date'
          : degraded
            ? 'blocked by errors (see Degraded)'
            : `waiting for ${notReady.join(', ')}`,
      ),
      condition(
        'Degraded',
        degraded,
        degraded ? (lost.length ? 'VolumeNodeLost' : 'Errors') : 'NoErrors',
        degraded ? degradedMsg.slice(0, 1000) : 'no errors',
      ),
      ...comps,
      // Not a component: scraping is optional, so it never holds the Holt back.
      ...(monitoring ? [monitoring] : []),
      // Nor is the ingress's exposure (a missing Gateway API is said there).
      ...(exposed ? [exposed] : []),
    ],
    gen,
  );
  const wasLost = prev.conditions?.find((c) => c.type === 'Degraded')?.reason === 'VolumeNodeLost';
  if (lost.length && !wasLost)
    ctx.events.emit(holt, 'Warning', 'VolumeNodeLost', 'Reconcile', lostVolumesMessage(lost));
  if (prev.phase !== phase)
    ctx.events.emit(
      holt,
      phase === 'Degraded' ? 'Warning' : 'Normal',
      `Phase${phase}`,
      'Reconcile',
      `phase ${prev.phase ?? 'none'} -> ${phase}`,
    );
  await writeStatus(ctx.client, holt, {
    phase,
    observedGeneration: gen,
    conditions,
    endpoints: storeEndpoints(owner, spec),
    agents: { total: agents.length, ready: agentsReady },
    ...(data ? { data } : {}),
  });
  // Throwing after the status is written makes the queue retry with backoff.
  if (degraded) throw new Error(`holt ${key} degraded: ${degradedMsg}`);
  // Re-checked without a Kubernetes event: the quarantine and retention (they change in Redis), and
  // a missing Prometheus Operator (its CRD may be installed later).
  const polls = [
    ...(ctx.runtime?.readHolt ? [ctx.statusPollMs] : []),
    ...(monitoring?.status === 'False' ? [ctx.pollMs] : []),
    // Token Secrets have no informer: a deleted one (revoked) is seen on the next pass.
    ...(ingress.serving ? [ctx.statusPollMs] : []),
  ];
  return polls.length ? { requeueAfterMs: Math.min(...polls) } : undefined;
}
