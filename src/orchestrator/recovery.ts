import {
  grantQueues,
  indexMissingArtefacts,
  moveToDormant,
  removeFromGrantQueue,
} from '../blackboard/claim-engine.ts';
import type { Blackboard } from '../blackboard/client.ts';
import type { Claim } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import { pendingGrants } from './decide.ts';
import type { GrantDispatcher } from './dispatch.ts';
import { type ClaimStepper, NotLeaderError } from './step.ts';

const BATCH = 500;

/** What recovery and re-announcement need of a term. */
export interface RecoveryDeps {
  bb: Blackboard;
  log: Logger;
  dispatcher: GrantDispatcher;
  redispatchAfterMs: number;
  stepper: ClaimStepper;
  alive: () => boolean;
  kick: (claimId: string) => void;
  /** When each settled claim's grants are next checked for a re-announcement (ms). */
  nextRedispatch: Map<string, number>;
}

/**
 * Announces again the grants of `c` that still lack output. Pups dedupe on (claim, role), so
 * re-announcing a grant whose work is under way is harmless. Returns how many were announced.
 */
async function renotify(d: RecoveryDeps, c: Claim, logExtra: Record<string, unknown> = {}): Promise<number> {
  let n = 0;
  for (const g of pendingGrants(c, await d.stepper.outputs(c))) {
    if (!d.alive()) throw new NotLeaderError();
    await d.dispatcher.dispatch({ claim: c, ...g, reason: 'recovery' });
    n++;
    d.log.info(
      {
        event_type: 'grant_renotified',
        claim_id: c.id,
        agent_name: g.role,
        claim_type: g.claimType,
        ...logExtra,
      },
      'grant_renotified',
    );
  }
  return n;
}

/**
 * A term's start: rebuilds from Redis. Artefacts written without our index (Holt's tools) are
 * indexed (the first reconcile then claims them), every active claim resumes, grants still lacking
 * output are re-announced, and dormant claims are reported.
 */
export async function recoverTerm(d: RecoveryDeps): Promise<void> {
  const { bb, log } = d;
  const t0 = Date.now();
  const { indexed, malformed } = await indexMissingArtefacts(bb);
  if (indexed.length || malformed.length)
    log.info({ event_type: 'artefacts_indexed', indexed: indexed.length, malformed }, 'artefacts_indexed');
  const active = await bb.activeClaimIds();
  const ids = [...new Set([...active, ...(await bb.dormantClaimIds())])];
  const wasActive = new Set(active);
  let recovered = 0;
  let renotified = 0;
  for (let i = 0; i < ids.length; i += BATCH) {
    const claims = await bb.getClaims(ids.slice(i, i + BATCH));
    // Dormant claims from before the dormant set leave the active set (the pups re-read it often).
    const legacyDormant = claims
      .filter((vc) => vc?.claim.dormant_reason && wasActive.has(vc.claim.id))
      .map((vc) => vc?.claim.id ?? '');
    if (legacyDormant.length && d.alive()) await moveToDormant(bb, legacyDormant);
    for (const vc of claims) {
      if (!vc || !d.alive()) continue;
      const c = vc.claim;
      if (c.status === 'complete' || c.status === 'terminated') continue;
      recovered++;
      log.info({ event_type: 'claim_recovered', claim_id: c.id, status: c.status }, 'claim_recovered');
      if (c.dormant_reason) {
        // Reported, not terminated (Holt terminated all-ignore claims on restart).
        log.info(
          { event_type: 'claim_dormant', claim_id: c.id, reason: c.dormant_reason, recovered: true },
          'claim_dormant',
        );
        d.stepper.idleRev.set(c.id, vc.rev);
        // Closed while some agents were silent: a step re-opens it if one has bid since.
        if (c.silent_agents?.length) d.kick(c.id);
        continue;
      }
      d.nextRedispatch.set(c.id, Date.now() + d.redispatchAfterMs);
      renotified += await renotify(d, c);
      d.kick(c.id);
    }
  }
  // Holt's paused grants (M3.5): resume them instead of only counting them.
  let queued = 0;
  for (const [role, claimIds] of await grantQueues(bb)) {
    for (const id of claimIds) {
      const vc = await bb.getClaim(id);
      if (!vc || vc.claim.status === 'complete' || vc.claim.status === 'terminated') {
        await removeFromGrantQueue(bb, role, id);
      } else {
        queued++;
        d.kick(id);
      }
    }
  }
  if (queued) log.info({ event_type: 'grant_queues_recovered', queued }, 'grant_queues_recovered');
  log.info(
    {
      event_type: 'recovery_complete',
      claims_recovered: recovered,
      grants_renotified: renotified,
      duration_ms: Date.now() - t0,
    },
    'recovery_complete',
  );
}

/**
 * Re-announces the grants of settled claims recorded at least `redispatchAfterMs` ago whose agents
 * have written nothing: the announcement may have been lost (pub/sub is at-most-once) or, for a
 * dispatcher that runs after the compare-and-set, failed. Dispatchers are idempotent. Each settled
 * claim is read about once per interval, not on every reconcile.
 */
export async function redispatchDue(d: RecoveryDeps, ids: string[]): Promise<void> {
  const after = d.redispatchAfterMs;
  const now = Date.now();
  const due = ids.filter((id) => (d.nextRedispatch.get(id) ?? 0) <= now);
  for (let i = 0; i < due.length && d.alive(); i += BATCH) {
    for (const vc of await d.bb.getClaims(due.slice(i, i + BATCH))) {
      if (!vc) continue;
      const c = vc.claim;
      const grantedAt = c.phase_state?.start_time_ms ?? c.last_grant_time ?? c.created_at_ms ?? 0;
      if (grantedAt + after > now) {
        d.nextRedispatch.set(c.id, grantedAt + after);
        continue;
      }
      d.nextRedispatch.set(c.id, now + after);
      await renotify(d, c, { waited_ms: now - grantedAt });
    }
  }
}
