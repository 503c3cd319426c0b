import { z } from 'zod';
import { workerTarget } from '../blackboard/targets.ts';
import { ClaimType, Phase } from '../blackboard/types.ts';

// Rows read back from Postgres are parsed too: a schema drift fails loudly, never silently.
const int8 = z.union([z.string(), z.number()]).transform((v, ctx) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) ctx.addIssue({ code: 'custom', message: `not a safe integer: ${v}` });
  return n;
});
const ts = z.date();

export const InboxStatus = z.enum(['pending', 'claimed', 'waiting', 'done', 'failed']);
export type InboxStatus = z.infer<typeof InboxStatus>;

export const InboxRow = z.object({
  id: z.coerce.string(),
  instance: z.string(),
  worker_target: z.string(),
  actor_id: z.uuid(),
  turn_id: z.uuid(),
  claim_id: z.string(),
  role: z.string(),
  claim_type: ClaimType,
  phase: Phase,
  payload: z.record(z.string(), z.unknown()),
  status: InboxStatus,
  attempts: z.number().int(),
  /** When it is due; a waiting row's deadline, `Infinity` (Postgres 'infinity') when it has none. */
  available_at: ts.or(z.literal(Infinity)),
  lease_owner: z.string().nullable(),
  lease_expires_at: ts.nullable(),
  turn_epoch: int8,
  last_error: z.string().nullable(),
  /** The Question artefact a `waiting` row waits on (its Answer wakes the row). */
  waiting_on: z.string().nullable().optional(),
  /** The launcher's report of the worker that died holding this row (WorkerExit; parsed where used). */
  worker_exit: z.unknown().optional(),
  created_at: ts,
  updated_at: ts,
});
export type InboxRow = z.infer<typeof InboxRow>;

/** What a grant becomes: one inbox row for the actor of (claim, role). */
export const GrantInput = z.object({
  instance: z.string().min(1),
  workerTarget,
  claimId: z.string().min(1),
  role: z.string().min(1),
  claimType: ClaimType,
  phase: Phase,
  payload: z.record(z.string(), z.unknown()).default({}),
});
export type GrantInput = z.input<typeof GrantInput>;

/**
 * The fencing token of one claim execution. Every state write of the execution names it; once the
 * watchdog or a release bumps the epoch, the token is dead and every write with it changes nothing.
 */
export interface Fence {
  instance: string;
  inboxId: string;
  actorId: string;
  turnId: string;
  epoch: number;
  owner: string;
}

export function fenceOf(row: InboxRow): Fence {
  return {
    instance: row.instance,
    inboxId: row.id,
    actorId: row.actor_id,
    turnId: row.turn_id,
    epoch: row.turn_epoch,
    owner: row.lease_owner ?? '',
  };
}

export const HeadRow = z.object({
  actor_id: z.uuid(),
  status: z.enum(['idle', 'dispatched', 'running', 'suspended']),
  active_turn_id: z.uuid().nullable(),
  turn_epoch: int8,
  lease_owner: z.string().nullable(),
  lease_expires_at: ts.nullable(),
});
export type HeadRow = z.infer<typeof HeadRow>;

export const TurnRow = z.object({
  turn_id: z.uuid(),
  actor_id: z.uuid(),
  claim_id: z.string(),
  role: z.string(),
  status: z.enum(['queued', 'running', 'done', 'failed']),
  turn_epoch: int8,
  result: z.unknown().nullable(),
  result_artefact_id: z.uuid().nullable(),
  error: z.string().nullable(),
});
export type TurnRow = z.infer<typeof TurnRow>;

export const DepthRow = z.object({
  worker_target: z.string(),
  pending: int8,
  in_flight: int8,
  oldest_pending_seconds: z.union([z.string(), z.number()]).transform(Number),
});
export type QueueDepth = z.infer<typeof DepthRow>;

/** One LLM or tool step of a turn (docs/agent-worker.md § The inbox: usage and cost in metadata, tool call ids). */
export const StepInput = z.object({
  seq: z.number().int().nonnegative(),
  kind: z.string().min(1),
  status: z.enum(['started', 'completed', 'failed']).default('completed'),
  toolCallIds: z.array(z.string()).default([]),
  metadata: z.record(z.string(), z.unknown()).default({}),
  error: z.string().optional(),
});
export type StepInput = z.input<typeof StepInput>;
