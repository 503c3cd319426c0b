import type { AgentSpec } from '../../api/agent.ts';
import { errorMessage } from '../../common/errors.ts';
import { withTimeout } from '../../common/timeout.ts';
import { FIELD_MANAGER } from '../kube/apply.ts';
import { isForbidden, isNotFound, type KubeObject } from '../kube/kube.ts';
import type { ReconcileResult } from '../kube/queue.ts';
import type { Condition } from '../kube/status.ts';
import { agentDeployment, agentPoolName, agentWorkerPool, shapeOf } from '../specs/agent.ts';
import { agentTokens } from '../specs/ingress.ts';
import { ownerOf } from '../specs/meta.ts';
import { agentEgressPolicy, collectorService, dnsDenied } from '../specs/networkpolicy.ts';
import { type AgentFigures, type McpServerStatus, mcpServerNote, mcpServersOf } from './agentfigures.ts';
import { claimJobs } from './claimjobs.ts';
import {
  applyChildren,
  type ControllerContext,
  conditionTrue,
  readinessReporter,
  workloadReady,
} from './context.ts';
import { podAddresses } from './dns.ts';
import { RUNTIME_READ_TIMEOUT_MS } from './holtdata.ts';
import { tokenOf } from './ingress.ts';
import { parseAgent, parseHolt, splitKey } from './resources.ts';
import { toolServerNote, withToolServers } from './toolserver.ts';

/**
 * The finalizer older operators put on every Agent (held while the agent was in its Holt's registry).
 * None is added any more: the Holt's reconcile rewrites the registry from the Agents that exist
 * (level-triggered), so a deleted Agent leaves it without one. A finalizer would also hang the
 * deletion of a namespace: the operator's RoleBinding there goes with the namespace's content, after
 * which it may no longer patch the Agent to let go. Old Agents lose it at their next reconcile.
 */
export const REGISTRY_FINALIZER = 'holt.io/registry';
export const AGENT_PRUNE_KINDS = ['Deployment', 'WorkerPool', 'NetworkPolicy'] as const;

/**
 * Removes the old finalizer with a merge patch guarded by resourceVersion (a stale cache gets a 409
 * and a retry). An object already gone (404), or a namespace whose RBAC is already gone (403, the
 * namespace is being deleted), is left alone: the deletion does not wait for us.
 */
async function dropOldFinalizer(ctx: ControllerContext, agent: KubeObject): Promise<void> {
  if (!agent.metadata.finalizers?.includes(REGISTRY_FINALIZER)) return;
  const others = agent.metadata.finalizers.filter((f) => f !== REGISTRY_FINALIZER);
  await ctx.client
    .mergePatch(
      'Agent',
      agent.metadata.namespace,
      agent.metadata.name,
      { metadata: { resourceVersion: agent.metadata.resourceVersion, finalizers: others } },
      FIELD_MANAGER,
    )
    .catch((e: unknown) => {
      if (isNotFound(e) || (agent.metadata.deletionTimestamp && isForbidden(e))) return;
      throw e;
    });
}

/**
 * `claimsInFlight` and `budget` for the status: read from the Holt's Redis, or, when it cannot be
 * read, the values last written (status is applied whole, so leaving them out would erase them)
 * with a note for the Ready message. An unreachable Redis alone never degrades the agent.
 */
async function runtimeStatus(
  ctx: ControllerContext,
  ns: string,
  holt: string,
  role: string,
  /** The names of its inline MCP servers (spec.llm.mcpServers). */
  inline: string[],
  prev: {
    claimsInFlight?: number;
    budget?: AgentFigures['budget'];
    life?: AgentFigures['life'];
    memory?: AgentFigures['memory'];
    mcpServers?: McpServerStatus[];
  },
): Promise<{ fields: Record<string, unknown>; note: string }> {
  if (!ctx.runtime) return { fields: {}, note: '' };
  try {
    const r = await withTimeout(
      ctx.runtime.read({ namespace: ns, name: holt }, role),
      RUNTIME_READ_TIMEOUT_MS,
      'reading the Holt Redis',
    );
    const mcpServers = r.mcp && inline.length ? mcpServersOf(r.mcp, inline) : undefined;
    return {
      fields: {
        claimsInFlight: r.claimsInFlight,
        ...(r.budget ? { budget: r.budget } : {}),
        ...(r.life ? { life: r.life } : {}),
        ...(r.memory ? { memory: r.memory } : {}),
        ...(mcpServers ? { mcpServers } : {}),
      },
      note:
        mcpServerNote(mcpServers ?? []) +
        (r.loadStale
          ? '; claims in flight not refreshed (no orchestrator has published them for a minute)'
          : ''),
    };
  } catch (e) {
    ctx.log.debug(
      { event_type: 'agent_runtime_unavailable', holt: `${ns}/${holt}`, role, error: String(e) },
      'cannot read claims in flight / budget; keeping the last values',
    );
    return {
      fields: {
        ...(prev.claimsInFlight !== undefined ? { claimsInFlight: prev.claimsInFlight } : {}),
        ...(prev.budget ? { budget: prev.budget } : {}),
        ...(prev.life ? { life: prev.life } : {}),
        ...(prev.memory ? { memory: prev.memory } : {}),
        ...(prev.mcpServers && inline.length ? { mcpServers: prev.mcpServers } : {}),
      },
      // Fixed text: a changing error string would be a status write on every poll.
      note:
        mcpServerNote(inline.length ? (prev.mcpServers ?? []) : []) +
        '; claims in flight and budget not refreshed (Holt Redis unreachable)',
    };
  }
}

export async function reconcileAgent(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  const [ns, name] = splitKey(key);
  const agent = ctx.cache.get('Agent', ns, name);
  if (!agent) return undefined;
  // Being deleted: nothing to do here (the Holt's reconcile, enqueued by this event, drops the role
  // from the registry; owner references take the pup's objects).
  await dropOldFinalizer(ctx, agent);
  if (agent.metadata.deletionTimestamp) return undefined;
  const owner = ownerOf(agent);
  const prev = (agent.status ?? {}) as {
    conditions?: Condition[];
    claimsInFlight?: number;
    budget?: AgentFigures['budget'];
    life?: AgentFigures['life'];
    memory?: AgentFigures['memory'];
    mcpServers?: McpServerStatus[];
  };
  // The Agent status has no phase field: phase here only names the Ready/Progressing/Degraded mix.
  const status = readinessReporter(ctx, agent);
  const parsed = parseAgent(agent);
  if (!parsed.ok) {
    await status('Failed', false, 'InvalidSpec', parsed.error);
    return undefined;
  }
  // Its ToolServers join its MCP servers here, so every pod built below (pup, claim Job) has them.
  const { spec: a, toolServers } = withToolServers(ctx, ns, parsed.spec);
  const holt = ctx.cache.get('Holt', ns, a.holt);
  const holtSpec = holt ? parseHolt(holt) : undefined;
  if (!holt) {
    // Without its Holt an agent has no stores to talk to: its pods stop, and come back with the Holt
    // (whose events enqueue its agents, so no polling is needed). The caches are synced before any
    // reconcile, so "not in the cache" means gone, not "not listed yet".
    const res = await applyChildren(ctx, owner.uid, ns, [], AGENT_PRUNE_KINDS);
    if (res.deleted.length)
      ctx.events.emit(agent, 'Normal', 'Pruned', 'HoltNotFound', `deleted ${res.deleted.join(', ')}`);
    await status('Pending', false, 'HoltNotFound', `Holt ${a.holt} not found`);
    return undefined;
  }
  if (!holtSpec?.ok) {
    // An invalid Holt is a typo to fix, not a reason to stop running agents.
    await status('Pending', false, 'HoltInvalid', `Holt ${a.holt} is invalid: ${holtSpec?.error ?? ''}`, {
      ...(prev.claimsInFlight !== undefined ? { claimsInFlight: prev.claimsInFlight } : {}),
      ...(prev.budget ? { budget: prev.budget } : {}),
    });
    return undefined;
  }
  const shape = shapeOf(a);
  const stores = await podAddresses(ctx, owner.namespace, a.holt, holtSpec.spec.tracing);
  const collector = collectorService(holtSpec.spec.tracing.endpoint);
  if (collector && !stores.collector && dnsDenied(a, holtSpec.spec.stores))
    ctx.events.emit(
      agent,
      'Warning',
      'CollectorUnresolved',
      'Apply',
      `Service ${collector.namespace}/${collector.name} (spec.tracing.endpoint) has no address the operator can find: this agent's pods go without DNS and export no spans until it has`,
    );
  const desired = [agentDeployment(owner, a, holtSpec.spec, ctx.runtimeImage, stores)];
  if (shape === 'pool' && !a.workerPool) desired.push(agentWorkerPool(owner, a));
  const egress = agentEgressPolicy(owner, a, a.llm?.baseUrl ?? holtSpec.spec.llm?.baseUrl, ctx.network);
  if (egress.policy) desired.push(egress.policy);
  if (egress.dropped.length)
    ctx.events.emit(
      agent,
      'Warning',
      'EgressExcepted',
      'Apply',
      `egressTo.cidrs ${egress.dropped.join(', ')} lie inside the cluster's or the metadata ranges and open nothing`,
    );
  const res = await applyChildren(ctx, owner.uid, ns, desired, AGENT_PRUNE_KINDS);
  if (res.created.length)
    ctx.events.emit(agent, 'Normal', 'Created', 'Apply', `created ${res.created.join(', ')}`);
  if (res.updated.length)
    ctx.events.emit(agent, 'Normal', 'Updated', 'Apply', `updated ${res.updated.join(', ')}`);
  if (res.deleted.length)
    ctx.events.emit(agent, 'Normal', 'Pruned', 'Apply', `deleted ${res.deleted.join(', ')}`);
  // A shape change (e.g. strategy reuse ↔ fresh_per_call) moves the pup's selector: say why pods restart.
  const replacing = res.replaced.length > 0;
  if (replacing)
    ctx.events.emit(
      agent,
      'Normal',
      'DeploymentReplaced',
      'Replace',
      `deleted to re-create (pods restart): ${res.replaced.join('; ')}`,
    );
  const errors = [...res.errors];
  if (shape === 'jobs') {
    try {
      const { created, deleted } = await claimJobs(ctx, owner, a, holtSpec.spec);
      if (created.length)
        ctx.events.emit(agent, 'Normal', 'ClaimJobs', 'Execute', `started ${created.length} claim job(s)`);
      if (deleted.length)
        ctx.events.emit(
          agent,
          'Normal',
          'ClaimJobsDone',
          'Delete',
          `deleted ${deleted.length} finished claim job(s)`,
        );
    } catch (e) {
      errors.push(`claim jobs: ${errorMessage(e)}`);
    }
  }
  const dep = workloadReady(ctx.cache.get('Deployment', ns, name));
  const poolName = shape === 'pool' ? (a.workerPool ?? agentPoolName(name)) : undefined;
  const pool = poolName ? ctx.cache.get('WorkerPool', ns, poolName) : undefined;
  const dep0 = ctx.cache.get('Deployment', ns, name);
  const poolReady = !poolName || conditionTrue(pool, 'Ready');
  const ready = errors.length === 0 && !replacing && dep.ready && poolReady;
  // Its inline servers only: those its ToolServers added are status.toolServers'.
  const inline = (parsed.spec.llm?.mcpServers ?? []).map((m) => m.name);
  const rt = await runtimeStatus(ctx, ns, a.holt, a.role, inline, prev);
  const ingress = await ingressStatus(ctx, ns, name, a);
  const extra = {
    ...(ingress ? { ingress } : {}),
    role: a.role,
    mode: shape === 'standard' ? 'standard' : shape === 'pool' ? 'scalable' : 'freshPerCall',
    replicas: (dep0?.status as { replicas?: number } | undefined)?.replicas ?? 0,
    readyReplicas: dep.readyReplicas,
    ...(poolName ? { workerPool: poolName } : {}),
    ...(toolServers.length ? { toolServers } : {}),
    ...rt.fields,
  };
  if (errors.length) {
    ctx.events.emit(agent, 'Warning', 'ApplyFailed', 'Apply', errors.join('; '));
    await status('Degraded', false, 'ApplyFailed', errors.join('; ').slice(0, 1000) + rt.note, extra);
    throw new Error(`agent ${key}: ${errors.join('; ')}`);
  }
  const why =
    (replacing
      ? 'pup Deployment being replaced (selector changed)'
      : !dep.ready
        ? `pup ${dep.reason}`
        : !poolReady
          ? `worker pool ${poolName} not ready`
          : 'pup ready') +
    toolServerNote(toolServers) +
    rt.note;
  await status(
    ready ? 'Ready' : 'Progressing',
    ready,
    ready ? 'Ready' : replacing ? 'Replacing' : dep.ready ? 'WorkerPoolNotReady' : dep.reason,
    why,
    extra,
  );
  // Claim Jobs and runtime values change without a Kubernetes event: both are polled (claim Jobs
  // also on their target's doorbell, see claimbells.ts; the poll catches a lost bell).
  const polls = [
    ...(shape === 'jobs' && ctx.claims ? [ctx.pollMs] : []),
    ...(ctx.runtime ? [ctx.statusPollMs] : []),
    // Token Secrets have no informer (the Holt's reconcile makes them; a user may delete one).
    ...(ingress ? [ingress.tokens.every((t) => t.present) ? ctx.statusPollMs : ctx.pollMs] : []),
  ];
  return polls.length ? { requeueAfterMs: Math.min(...polls) } : undefined;
}

/** `status.ingress`: each token the spec declares, and whether its Secret holds one (the Holt's reconcile makes them). */
async function ingressStatus(
  ctx: ControllerContext,
  ns: string,
  name: string,
  a: AgentSpec,
): Promise<{ tokens: { name: string; secretName: string; present: boolean }[] } | undefined> {
  const tokens = agentTokens(name, a.role ?? name, a);
  if (!tokens.length) return undefined;
  const out = [];
  for (const t of tokens) {
    const s = await ctx.client.get('Secret', ns, t.secretName).catch(() => undefined);
    out.push({
      name: t.name,
      secretName: t.secretName,
      // As the Holt's reconcile reads it (a blank token admits nothing, so it is not present).
      present: tokenOf(s) !== undefined,
    });
  }
  return { tokens: out };
}
