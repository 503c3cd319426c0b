import type { Blackboard } from '../../blackboard/client.ts';
import { feedbackExcerpt, isApproval } from '../../blackboard/review.ts';
import type { Artefact, Claim, WorkflowEvent } from '../../blackboard/types.ts';
import type { WatchItem } from '../format.ts';

/** A feedback (rework) claim: assigned straight to the producer with the reviews as context, never bid on. */
function isFeedbackClaim(c: Claim): boolean {
  return (c.additional_context_ids?.length ?? 0) > 0 && !c.phase_state && c.granted_exclusive_agent !== '';
}

/**
 * History rebuilt from what the blackboard stores (as Holt's watch does): artefacts, claims at their
 * artefact's time, bids at +1 ms, grants at +100 ms, reviews and reworks; sorted by time.
 */
export async function replayHistory(
  bb: Blackboard,
  range: { since?: number; until?: number },
): Promise<WatchItem[]> {
  const ids = await bb.listArtefactIds({ sinceMs: range.since, untilMs: range.until });
  const artefacts = (await bb.getArtefacts(ids)).filter((a): a is Artefact => a !== null);
  const byId = new Map(artefacts.map((a) => [a.id, a]));
  const items: WatchItem[] = artefacts.map((a) => ({ kind: 'artefact', at: a.created_at_ms, artefact: a }));
  const ev = (at: number, event: WorkflowEvent): WatchItem => ({ kind: 'workflow', at, event });

  const claimIds = await bb.listClaimIds();
  const claims = (await bb.getClaims(claimIds)).filter((c) => c !== null);
  for (const { claim } of claims) {
    const target = byId.get(claim.artefact_id);
    if (!target) continue;
    const t = target.created_at_ms;
    items.push({ kind: 'claim', at: t, claim });
    if (isFeedbackClaim(claim)) {
      // Holt announces a rework with feedback_claim_created, never with claim_granted.
      const original = claims.find(
        (c) => c.claim.artefact_id === claim.artefact_id && c.claim.id !== claim.id,
      );
      items.push(
        ev(t + 100, {
          event: 'feedback_claim_created',
          data: {
            feedback_claim_id: claim.id,
            original_claim_id: original?.claim.id ?? '',
            target_agent_role: claim.granted_exclusive_agent,
            iteration: target.version,
          },
        }),
      );
      continue;
    }
    const bids = Object.entries(claim.phase_state?.all_bids ?? {});
    for (const [i, [agent, bid]] of bids.entries())
      items.push(
        ev(t + 1 + i, {
          event: 'bid_submitted',
          data: { claim_id: claim.id, agent_name: agent, bid_type: bid },
        }),
      );
    const grants: [string, 'review' | 'claim' | 'exclusive'][] = [
      ...claim.granted_review_agents.map((r) => [r, 'review'] as [string, 'review']),
      ...claim.granted_parallel_agents.map((r) => [r, 'claim'] as [string, 'claim']),
      ...(claim.granted_exclusive_agent
        ? [[claim.granted_exclusive_agent, 'exclusive'] as [string, 'exclusive']]
        : []),
    ];
    for (const [i, [agent, type]] of grants.entries())
      items.push(
        ev(t + 100 + i, {
          event: 'claim_granted',
          data: { claim_id: claim.id, agent_name: agent, grant_type: type, agent_image_id: '' },
        }),
      );
  }
  for (const a of artefacts) {
    if (a.structural_type === 'Review') {
      const original = a.source_artefacts[0] ?? '';
      items.push(
        ev(
          a.created_at_ms,
          isApproval(a.payload)
            ? {
                event: 'review_approved',
                data: { original_artefact_id: original, reviewer_role: a.produced_by_role },
              }
            : {
                event: 'review_rejected',
                data: {
                  original_artefact_id: original,
                  reviewer_role: a.produced_by_role,
                  feedback: feedbackExcerpt(a.payload),
                },
              },
        ),
      );
    }
    if (a.version > 1)
      items.push(
        ev(a.created_at_ms - 1, {
          event: 'artefact_reworked',
          data: {
            new_artefact_id: a.id,
            logical_id: a.logical_id,
            new_version: a.version,
            previous_version_id: a.source_artefacts[0] ?? '',
            artefact_type: a.type,
            produced_by_role: a.produced_by_role,
          },
        }),
      );
  }
  return items.sort((x, y) => x.at - y.at);
}
