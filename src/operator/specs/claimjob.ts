import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../kube/kube.ts';
import type { AgentResourceSpec } from './agent.ts';
import { childName, labels, meta, type Owner } from './meta.ts';
import { pupPodTemplate, type StoreAddresses } from './pup.ts';

export const CLAIM_LABEL = 'holt.io/claim';
/** The attempt (the row's turn epoch) a claim Job runs: once its row moved past it, the Job is done with. */
export const CLAIM_EPOCH_LABEL = 'holt.io/claim-epoch';

/**
 * One Job name per (agent, claim, attempt): re-creating it for the same attempt is a no-op 409,
 * while a reclaimed or retried row (its turn epoch moved on) gets a new Job at once instead of
 * waiting for the finished one's TTL.
 */
export const claimJobName = (agent: string, claimId: string, epoch: number) =>
  childName(
    agent,
    claimId
      .replace(/[^a-z0-9]/gi, '')
      .slice(0, 12)
      .toLowerCase(),
    String(epoch),
  );

/** A fresh_per_call agent's Job for one pending claim: a worker pup with `--execute-claim`. */
export function claimJob(
  owner: Owner,
  a: AgentResourceSpec,
  holtSpec: HoltSpec,
  runtimeImage: string,
  claimId: string,
  epoch: number,
  stores?: StoreAddresses,
): KubeObject {
  const name = claimJobName(owner.name, claimId, epoch);
  const lbls = labels(a.holt, owner.name, 'claim-job', { 'holt.io/role': a.role });
  const claimLabel = claimId.replace(/[^A-Za-z0-9._-]/g, '').slice(0, 63);
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: meta(name, owner, { ...lbls, [CLAIM_LABEL]: claimLabel, [CLAIM_EPOCH_LABEL]: String(epoch) }),
    spec: {
      // The pup's fencing makes a retried execution safe, but a claim failing twice is a Failure.
      backoffLimit: 1,
      // A replacement pod only once the last one has ended: a pod deleted mid-claim (a node lost, a
      // drill) may hold the claim's lease while it terminates, and one started beside it would race
      // the operator's next attempt (the e2e's killed Job pod met it: the Job failed both pods).
      podReplacementPolicy: 'Failed',
      // The backstop: the operator deletes a succeeded Job once its attempt is over (claimjobs.ts).
      ttlSecondsAfterFinished: 600,
      template: pupPodTemplate({
        holt: a.holt,
        holtSpec,
        agent: a,
        mode: 'worker',
        runtimeImage,
        image: a.worker?.image ?? a.image,
        workspaceMode: a.worker?.workspaceMode ?? a.workspace.mode,
        labels: { ...lbls, [CLAIM_LABEL]: claimLabel },
        args: ['--execute-claim', claimId],
        restartPolicy: 'Never',
        volumes: a.volumes,
        stores,
      }),
    },
  };
}
