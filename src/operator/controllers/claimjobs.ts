import { workerTargetOf } from '../../api/agent.ts';
import type { PendingClaim } from '../autoscale/backlog.ts';
import { isConflict, type KubeObject } from '../kube/kube.ts';
import type { AgentResourceSpec } from '../specs/agent.ts';
import { CLAIM_EPOCH_LABEL, claimJob, claimJobName } from '../specs/claimjob.ts';
import type { Owner } from '../specs/meta.ts';
import { type ControllerContext, jobState } from './context.ts';
import { podAddresses } from './dns.ts';

/** The claim a Job runs (its `--execute-claim` argument) and the attempt (its epoch label), if it says. */
export function claimJobAttempt(job: KubeObject): PendingClaim | undefined {
  const spec = job.spec as { template?: { spec?: { containers?: { args?: string[] }[] } } } | undefined;
  const args = spec?.template?.spec?.containers?.[0]?.args ?? [];
  const i = args.indexOf('--execute-claim');
  const claimId = i >= 0 ? args[i + 1] : undefined;
  const epoch = Number(job.metadata.labels?.[CLAIM_EPOCH_LABEL]);
  return claimId && Number.isInteger(epoch) && epoch >= 0 ? { claimId, epoch } : undefined;
}

/**
 * The succeeded claim Jobs whose attempt is over: their row is no longer pending at their epoch
 * (done, failed for good, or taken on by a later attempt). Kept: a Job still running, a failed one
 * (its pods' logs stay for inspection until its TTL), one whose row is still pending at its epoch
 * (its pod never took the row: its TTL is the back-off before the next try), and one from before
 * the epoch label (its TTL collects it). Pure.
 */
export function finishedClaimJobs(jobs: KubeObject[], pending: PendingClaim[]): KubeObject[] {
  const open = new Set(pending.map((p) => `${p.claimId}/${p.epoch}`));
  return jobs.filter((j) => {
    if (j.metadata.deletionTimestamp || jobState(j) !== 'succeeded') return false;
    const at = claimJobAttempt(j);
    return at !== undefined && !open.has(`${at.claimId}/${at.epoch}`);
  });
}

/**
 * fresh_per_call: one Job per pending claim of the agent's target and attempt (the row's turn epoch,
 * see claimJobName), at most maxConcurrent running. A Job only blocks its own attempt: a finished
 * one of an earlier attempt never delays a reclaimed or retried row. A finished Job of the same
 * attempt means its pod never took the row: it is retried once that Job's TTL has collected it (a
 * back-off, not a hot loop of failing pods). A succeeded Job whose attempt is over is deleted with
 * its pod at once (finishedClaimJobs), so finished claims leave no Jobs behind.
 */
export async function claimJobs(
  ctx: ControllerContext,
  owner: Owner,
  a: AgentResourceSpec,
  holtSpec: Parameters<typeof claimJob>[2],
): Promise<{ created: string[]; deleted: string[] }> {
  if (!ctx.claims) return { created: [], deleted: [] };
  const t = { namespace: owner.namespace, holt: a.holt, target: workerTargetOf(a, a.role) };
  const jobs = ctx.cache.owned('Job', owner.namespace, owner.uid);
  const deleted: string[] = [];
  const succeeded = jobs.filter((j) => jobState(j) === 'succeeded' && claimJobAttempt(j));
  if (succeeded.length) {
    const ids = [...new Set(succeeded.map((j) => claimJobAttempt(j)?.claimId as string))];
    for (const j of finishedClaimJobs(succeeded, await ctx.claims.pendingOf(t, ids))) {
      // Background: the Job's pod goes with it (a Job deleted through the API orphans it by default).
      await ctx.client.delete('Job', owner.namespace, j.metadata.name, j.metadata.uid, 'Background');
      deleted.push(j.metadata.name);
    }
  }
  let running = jobs.filter((j) => jobState(j) === 'running').length;
  const max = a.worker?.maxConcurrent ?? a.replicas;
  if (running >= max) return { created: [], deleted };
  const claims = await ctx.claims.pendingClaims(t, max * 2);
  const created: string[] = [];
  const stores = claims.length
    ? await podAddresses(ctx, owner.namespace, a.holt, holtSpec.tracing)
    : undefined;
  for (const { claimId, epoch } of claims) {
    if (running >= max) break;
    if (ctx.cache.get('Job', owner.namespace, claimJobName(owner.name, claimId, epoch))) continue;
    try {
      await ctx.client.create(claimJob(owner, a, holtSpec, ctx.runtimeImage, claimId, epoch, stores));
      created.push(claimId);
      running++;
    } catch (e) {
      if (!isConflict(e)) throw e;
    }
  }
  return { created, deleted };
}
