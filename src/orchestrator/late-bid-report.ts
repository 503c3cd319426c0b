import type { Blackboard } from '../blackboard/client.ts';
import type { Logger } from '../common/logger.ts';
import { claimContext, GEN_AI, pastSpan } from '../telemetry/spans.ts';
import type { OrchestratorMetrics } from './metrics.ts';

/**
 * A bid after its consensus closed without it (the bid timeout counted it as `ignore`): said by name in
 * the log, the metrics and a workflow event, and marked in the claim's trace as a `bid_late {role}`
 * span (the bid's own span, in the bidder's pup, cannot know it was late).
 */
export function reportLateBid(
  deps: { bb: Blackboard; log: Logger; metrics: OrchestratorMetrics },
  bid: { claimId: string; role: string; bidType: string | undefined; lateByMs: number },
): void {
  const data = {
    claim_id: bid.claimId,
    agent_name: bid.role,
    bid_type: bid.bidType ?? '',
    late_by_ms: bid.lateByMs,
  };
  deps.log.warn({ event_type: 'bid_late', ...data }, 'bid_late');
  deps.metrics.lateBids.inc({ role: bid.role });
  deps.bb
    .publishWorkflowEvent({ event: 'bid_late', data })
    .catch((e: unknown) => deps.log.warn({ event_type: 'event_publish_failed', error: String(e) }));
  void deps.bb
    .getClaim(bid.claimId)
    .then((found) => {
      const now = Date.now();
      pastSpan(`bid_late ${bid.role}`, {
        parent: claimContext(found?.claim ?? {}),
        startMs: now,
        endMs: now,
        attributes: {
          [GEN_AI.agentName]: bid.role,
          'holt.claim.id': bid.claimId,
          'holt.bid.type': bid.bidType ?? '',
          'holt.bid.late_by_ms': bid.lateByMs,
          'holt.bid.outcome': 'ignored_late',
        },
      });
    })
    .catch(() => undefined); // a trace is best effort: the log line and the event said it already
}
