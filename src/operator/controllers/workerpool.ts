import type { ReconcileResult } from '../kube/queue.ts';
import type { Condition } from '../kube/status.ts';
import { ownerOf } from '../specs/meta.ts';
import { poolSelector, workerDeployment } from '../specs/workerpool.ts';
import { applyChildren, type ControllerContext, readinessReporter, workloadReady } from './context.ts';
import { podAddresses } from './dns.ts';
import { holtOf, parseAgent, parseHolt, parsePool, splitKey } from './resources.ts';
import { withToolServers } from './toolserver.ts';

/**
 * A WorkerPool's Deployment of inbox workers, with spec.replicas copied from the pool (whoever
 * owns it there: the autoscaler, an HPA through /scale, or a person). Status: replicas and the
 * selector for /scale, readiness conditions.
 */
export async function reconcileWorkerPool(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  const [ns, name] = splitKey(key);
  const pool = ctx.cache.get('WorkerPool', ns, name);
  if (!pool || pool.metadata.deletionTimestamp) return undefined;
  const owner = ownerOf(pool);
  const prev = (pool.status ?? {}) as { conditions?: Condition[]; backlogReadFailures?: number };
  const status = readinessReporter(ctx, pool, { selector: poolSelector(name) });
  const parsed = parsePool(pool);
  if (!parsed.ok) {
    await status('Failed', false, 'InvalidSpec', parsed.error, {});
    return undefined;
  }
  const spec = parsed.spec;
  const holt = ctx.cache.get('Holt', ns, spec.holt);
  const holtSpec = holt ? parseHolt(holt) : undefined;
  if (!holtSpec?.ok) {
    await status('Pending', false, 'HoltNotFound', `Holt ${spec.holt} not found or invalid`, {});
    return undefined;
  }
  const agentObj = ctx.cache
    .list('Agent', ns)
    .map((a) => (holtOf(a) === spec.holt ? parseAgent(a) : undefined))
    .find((p) => p?.ok && p.spec.role === spec.role);
  const agent = agentObj?.ok ? withToolServers(ctx, ns, agentObj.spec).spec : undefined;
  const res = await applyChildren(
    ctx,
    owner.uid,
    ns,
    [
      workerDeployment(
        owner,
        spec,
        agent,
        holtSpec.spec,
        ctx.runtimeImage,
        await podAddresses(ctx, ns, spec.holt, holtSpec.spec.tracing),
      ),
    ],
    ['Deployment'],
  );
  if (res.created.length)
    ctx.events.emit(pool, 'Normal', 'Created', 'Apply', `created ${res.created.join(', ')}`);
  const dep = ctx.cache.get('Deployment', ns, name);
  const w = workloadReady(dep);
  const depStatus = (dep?.status ?? {}) as { replicas?: number };
  const extra = { replicas: depStatus.replicas ?? 0, readyReplicas: w.readyReplicas };
  if (res.errors.length) {
    ctx.events.emit(pool, 'Warning', 'ApplyFailed', 'Apply', res.errors.join('; '));
    await status('Degraded', false, 'ApplyFailed', res.errors.join('; ').slice(0, 1000), extra);
    throw new Error(`workerpool ${key}: ${res.errors.join('; ')}`);
  }
  const a = spec.autoscaling;
  if (
    a.mode === 'builtin' &&
    a.fallbackReplicas !== undefined &&
    (prev.backlogReadFailures ?? 0) >= a.fallbackAfterFailures
  ) {
    await status(
      'Degraded',
      w.ready,
      'BacklogUnavailable',
      'backlog cannot be read; holding fallback replicas',
      extra,
    );
    return undefined;
  }
  await status(
    w.ready ? 'Ready' : 'Progressing',
    w.ready,
    w.ready ? 'Ready' : w.reason,
    `${w.readyReplicas} ready workers`,
    extra,
  );
  return undefined;
}
