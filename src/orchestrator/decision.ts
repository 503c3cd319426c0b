import type { NewArtefact } from '../blackboard/client.ts';
import type { Artefact, Claim, ClaimType, Phase, WorkflowEvent } from '../blackboard/types.ts';

/** What the claim engine's decision (decide.ts) reads and returns: its snapshot, effects and decisions. */

export interface Policy {
  bidTimeoutMs: number;
  /** The widest a slow bidder's bid window may grow (bid-windows.ts); default 4 × bidTimeoutMs. */
  maxBidTimeoutMs?: number;
  /** 0 = unlimited. */
  maxReviewIterations: number;
}

export interface Snapshot {
  claim: Claim;
  target: Artefact | null;
  /** The raw bids hash (only needed while the claim is collecting bids). */
  bids: Record<string, string>;
  /** Artefacts listing the target among their sources, oldest first. */
  outputs: Artefact[];
  /** Roles registered now (the feedback producer check; consensus uses the claim's own snapshot). */
  registered: ReadonlySet<string>;
  /** role → its image's digest where known (Holt's agent_images): recorded on the claim it is granted. */
  images?: ReadonlyMap<string, string>;
  /** Start of the bid timeout for a claim without created_at_ms (one Holt made). */
  firstSeenMs: number;
  now: number;
  policy: Policy;
  /** role → its bid window where wider than the bid timeout (bid-windows.ts); none: the timeout. */
  bidWindows?: ReadonlyMap<string, number>;
}

export type GrantReason = 'grant' | 'rework' | 'recovery';

export type Effect =
  /** `claim` is set when the grant is on another claim than the one decided (a rework). */
  | { kind: 'grant'; role: string; claimType: ClaimType; phase: Phase; reason: GrantReason; claim?: Claim }
  | { kind: 'event'; event: WorkflowEvent }
  /** Written before the claim moves; its id is derived from the claim, so a replay is a no-op. */
  | { kind: 'artefact'; artefact: NewArtefact }
  /** Created before the claim moves, unless it exists (derived id). */
  | { kind: 'feedback_claim'; claim: Claim }
  | { kind: 'dequeue'; role: string };

export interface LogLine {
  event_type: string;
  level?: 'debug' | 'info' | 'warn';
  [key: string]: unknown;
}

export type Timing =
  | { metric: 'bid_latency'; ms: number }
  | { metric: 'phase_duration'; phase: Phase; ms: number };

export type Decision =
  | { kind: 'done' }
  | { kind: 'idle'; why: string }
  /** Still collecting bids; `missing` have not bid; decide again by `untilMs` at the latest. */
  | { kind: 'wait'; untilMs: number; missing: string[] }
  | { kind: 'write'; claim: Claim; before: Effect[]; after: Effect[]; logs: LogLine[]; timings: Timing[] };
