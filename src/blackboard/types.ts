import { z } from 'zod';
import { TraceParent, TraceState } from '../telemetry/carrier.ts';

export const STRUCTURAL_TYPES = ['Standard', 'Review', 'Question', 'Answer', 'Failure', 'Terminal'] as const;
export const StructuralType = z.enum(STRUCTURAL_TYPES);
export type StructuralType = z.infer<typeof StructuralType>;

export const BID_TYPES = ['review', 'claim', 'exclusive', 'ignore'] as const;
export const BidType = z.enum(BID_TYPES);
export type BidType = z.infer<typeof BidType>;

/** The grant type a pup receives: the bid that won it. */
export const ClaimType = z.enum(['review', 'claim', 'exclusive']);
export type ClaimType = z.infer<typeof ClaimType>;

export const CLAIM_STATUSES = [
  'pending_review',
  'pending_parallel',
  'pending_exclusive',
  'pending_assignment',
  'complete',
  'terminated',
] as const;
export const ClaimStatus = z.enum(CLAIM_STATUSES);
export type ClaimStatus = z.infer<typeof ClaimStatus>;

const uuid = z.uuid({ version: undefined, error: 'must be a UUID' });
const role = z.string().min(1, 'must not be empty');

/**
 * Extension fields (Holt's tools ignore them): the W3C trace context of the span that wrote the
 * artefact, or that a claim continues. A malformed value is dropped on read, never an error.
 */
function traceFields() {
  return {
    traceparent: TraceParent.optional().catch(undefined),
    tracestate: TraceState.optional().catch(undefined),
  };
}

export const Artefact = z.object({
  id: uuid,
  logical_id: uuid,
  version: z.number().int().min(1, 'version must be >= 1'),
  structural_type: StructuralType,
  type: z.string().min(1, 'type must not be empty'),
  payload: z.string(),
  source_artefacts: z.array(uuid),
  produced_by_role: role,
  created_at_ms: z.number().int().nonnegative(),
  ...traceFields(),
});
export type Artefact = z.infer<typeof Artefact>;

/** Whether the orchestrator opens a claim on an artefact of this type (Holt: not on Review, Failure, Terminal). */
export const takesClaim = (t: StructuralType): boolean =>
  t !== 'Review' && t !== 'Failure' && t !== 'Terminal';

export const Phase = z.enum(['review', 'parallel', 'exclusive']);
export type Phase = z.infer<typeof Phase>;

export const PhaseState = z.object({
  current: Phase,
  granted_agents: z.array(z.string()),
  received: z.record(z.string(), z.string()),
  all_bids: z.record(z.string(), BidType),
  start_time_ms: z.number().int(),
});
export type PhaseState = z.infer<typeof PhaseState>;

export const GrantQueueEntry = z.object({
  paused_at_ms: z.number().int(),
  agent_name: z.string(),
  position: z.number().int().default(0),
});
export type GrantQueueEntry = z.infer<typeof GrantQueueEntry>;

export const Claim = z.object({
  id: uuid,
  artefact_id: uuid,
  status: ClaimStatus,
  granted_review_agents: z.array(z.string()),
  granted_parallel_agents: z.array(z.string()),
  granted_exclusive_agent: z.string(),
  additional_context_ids: z.array(z.string()).optional(),
  termination_reason: z.string().optional(),
  phase_state: PhaseState.nullable().optional(),
  grant_queue: GrantQueueEntry.nullable().optional(),
  last_grant_agent: z.string().optional(),
  last_grant_time: z.number().int().optional(),
  artefact_expected: z.boolean().optional(),
  granted_agent_image_id: z.string().optional(),
  // Extensions (ours; Holt ignores unknown hash fields and JSON keys):
  /** The registered roles when the claim was created: the bidders its consensus waits for. */
  expected_bidders: z.array(z.string()).optional(),
  /** When the claim was created (ms), the start of its bid timeout. */
  created_at_ms: z.number().int().optional(),
  /** Set when nothing is left to grant (Holt's "dormant": the status stays pending_*). */
  dormant_reason: z.string().optional(),
  /**
   * The expected bidders that had not bid when the claim went dormant for want of bids (their pup was
   * not up): a bid from one of them later re-opens the bidding. Empty or absent: nothing revives it.
   */
  silent_agents: z.array(z.string()).optional(),
  /** When bidding was last re-opened (ms): the start of the bid timeout of a revived claim. */
  bids_reopened_at_ms: z.number().int().optional(),
  /** The trace context of the claimed artefact: the pups' work on the claim continues it. */
  ...traceFields(),
});
export type Claim = z.infer<typeof Claim>;

export const GrantNotification = z.object({
  event_type: z.literal('grant'),
  claim_id: uuid,
  claim_type: ClaimType,
});
export type GrantNotification = z.infer<typeof GrantNotification>;

/** A stored item set aside and never acted on: what, where and why, never its content. */
const QuarantineData = z.object({
  kind: z.string(),
  id: z.string(),
  claim_id: z.string().optional(),
  produced_by_role: z.string().optional(),
  /** A code: `author_not_granted`, `malformed`. */
  reason: z.string(),
  /** What was wrong, for a person (a parser's message, at most 200 characters). */
  detail: z.string().optional(),
});
/** The workflow events of Holt's protocol (workflow_events); the others are ours (workflow_events_ext). */
export const HOLT_WORKFLOW_EVENTS: ReadonlySet<string> = new Set([
  'bid_submitted',
  'claim_granted',
  'review_approved',
  'review_rejected',
  'feedback_claim_created',
  'artefact_reworked',
]);

/** The six workflow events Holt publishes on workflow_events, with their exact data keys. */
export const WorkflowEvent = z.discriminatedUnion('event', [
  z.object({
    event: z.literal('bid_submitted'),
    data: z.object({ claim_id: z.string(), agent_name: z.string(), bid_type: z.string() }),
  }),
  z.object({
    event: z.literal('claim_granted'),
    data: z.object({
      claim_id: z.string(),
      agent_name: z.string(),
      grant_type: ClaimType,
      agent_image_id: z.string(),
    }),
  }),
  z.object({
    event: z.literal('review_approved'),
    data: z.object({ original_artefact_id: z.string(), reviewer_role: z.string() }),
  }),
  z.object({
    event: z.literal('review_rejected'),
    data: z.object({ original_artefact_id: z.string(), reviewer_role: z.string(), feedback: z.string() }),
  }),
  z.object({
    event: z.literal('feedback_claim_created'),
    data: z.object({
      feedback_claim_id: z.string(),
      original_claim_id: z.string(),
      target_agent_role: z.string(),
      iteration: z.number().int(),
    }),
  }),
  z.object({
    event: z.literal('artefact_reworked'),
    data: z.object({
      new_artefact_id: z.string(),
      logical_id: z.string(),
      new_version: z.number().int(),
      previous_version_id: z.string(),
      artefact_type: z.string(),
      produced_by_role: z.string(),
    }),
  }),
  // Extension (ours): consensus closed by the bid timeout, naming the agents that never bid.
  z.object({
    event: z.literal('bid_timeout'),
    data: z.object({
      claim_id: z.string(),
      silent_agents: z.array(z.string()),
      timeout_ms: z.number().int(),
    }),
  }),
  // Extension (ours): a bid heard after the bid timeout closed its claim's consensus without it (it
  // counted as `ignore`); a bid late but in before the decision is simply counted.
  z.object({
    event: z.literal('bid_late'),
    data: z.object({
      claim_id: z.string(),
      agent_name: z.string(),
      bid_type: z.string(),
      late_by_ms: z.number().int(),
    }),
  }),
  // Extension (ours): a claim dormant for want of bids, re-opened for bidding because an agent that
  // was silent when its consensus closed (its pup not up yet) has bid since.
  z.object({
    event: z.literal('bidding_reopened'),
    data: z.object({ claim_id: z.string(), late_bidders: z.array(z.string()) }),
  }),
  // Extension (ours): a grant whose row or turn was done, but whose output is gone from the
  // blackboard (Redis lost data): run again under a new epoch.
  z.object({
    event: z.literal('grant_reopened'),
    data: z.object({ claim_id: z.string(), agent_name: z.string(), reason: z.string() }),
  }),
  // Extension (ours): a stored item set aside and never acted on (an artefact by a role the claim did
  // not grant, a malformed record): what, where and why, never its content.
  z.object({
    event: z.literal('quarantined'),
    data: QuarantineData,
  }),
]);
export type WorkflowEvent = z.infer<typeof WorkflowEvent>;

/** One entry of the quarantine hash (the `quarantined` event's data, and when). */
export const Quarantined = QuarantineData.extend({ at_ms: z.number().int() });
export type Quarantined = z.infer<typeof Quarantined>;

/** How the orchestrator reaches an agent (runtime data, written by `holt up` or the operator). */
export const AgentRegistration = z.object({
  role: role,
  /** standard: grants announced on the role's channel; scalable: grants become inbox rows for workers. */
  kind: z.enum(['standard', 'scalable']).default('standard'),
  worker_target: z
    .string()
    .regex(/^[a-z0-9_-]+$/, 'worker target must be one NATS subject token of [a-z0-9_-]')
    .optional(),
  max_concurrent: z.number().int().positive().optional(),
  image_id: z.string().optional(),
  /** Served over A2A (the ingress's /a2a/{role}): what its agent card says. */
  a2a: z
    .object({
      description: z.string().max(2000),
      skills: z
        .array(
          z.object({
            id: z.string().max(64),
            name: z.string().max(200),
            description: z.string().max(2000),
            tags: z.array(z.string().max(64)).max(20),
            examples: z.array(z.string().max(500)).max(10),
          }),
        )
        .max(32),
    })
    .optional(),
});
export type AgentRegistration = z.infer<typeof AgentRegistration>;
