import type { Attributes, Context, Span } from '@opentelemetry/api';
import { WorkerExit } from '../blackboard/worker-exits.ts';
import type { Fence, InboxRow } from '../state/schema.ts';
import { parseCarrier } from '../telemetry/carrier.ts';
import { claimContext, markFailed } from '../telemetry/spans.ts';
import type { Outcome } from './worker.ts';

/**
 * Each attempt at an inbox row is a consumer span in its claim's trace, named and attributed by the
 * OpenTelemetry messaging conventions (`process {destination}`); the dispatcher copies the claim's
 * trace fields into the row's payload, so a row carries its trace through Postgres.
 */

/** The messaging system Holt names for its Postgres inbox (not one of the conventions' well-known values). */
export const INBOX_SYSTEM = 'holt_inbox';

/** The trace a row's payload carries (the dispatcher copies its claim's), or undefined (a malformed one too). */
export const rowCarrier = (row: InboxRow) => parseCarrier(row.payload);

/** Whether `row` carries a valid trace of its claim (else its spans would start new traces). */
export const rowTraced = (row: InboxRow): boolean => rowCarrier(row) !== undefined;

/** The context an attempt at `row` continues: its claim's trace, else whatever is active. */
export const rowContext = (row: InboxRow): Context => claimContext(rowCarrier(row) ?? {});

/** The span's name and attributes for an attempt at `row` under `fence`. Pure. */
export function attemptSpan(
  row: InboxRow,
  fence: Fence,
  owner: string,
): { name: string; attributes: Attributes } {
  return {
    name: `process ${row.worker_target}`,
    attributes: {
      'messaging.system': INBOX_SYSTEM,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'claim',
      'messaging.destination.name': row.worker_target,
      'messaging.message.id': row.id,
      'messaging.consumer.group.name': row.worker_target,
      'gen_ai.agent.name': row.role,
      'holt.claim.id': row.claim_id,
      'holt.inbox.attempt': row.attempts,
      'holt.inbox.epoch': fence.epoch,
      'holt.inbox.owner': owner,
    },
  };
}

/** Marks how the attempt ended: `holt.inbox.outcome`, and `error.type` for a failed one (retried or not). */
export function endAttempt(span: Span, outcome: Outcome): void {
  span.setAttribute('holt.inbox.outcome', outcome);
  if (outcome === 'retry' || outcome === 'failed') markFailed(span, `claim_${outcome}`);
}

/** Why the watchdog took a lease back: it expired, or the worker holding it was reported dead. */
export type Recovery = 'lease_expired' | 'worker_exited';

/**
 * The span's name and attributes for `row` as the watchdog's reclaim returned it (its lease, held by
 * `owner` when known, taken back; the row pending again or failed for good). The row keeps the launcher's
 * report only when it is about the worker that just lost it: then the recovery is `worker_exited`, with
 * the report's exit fields (never its logs). Pure.
 */
export function reclaimSpan(
  row: InboxRow,
  owner: string | undefined,
): { name: string; attributes: Attributes; recovery: Recovery } {
  const reported = row.worker_exit !== null && row.worker_exit !== undefined;
  const exit = reported ? WorkerExit.safeParse(row.worker_exit) : undefined;
  const e = exit?.success ? exit.data : undefined;
  const recovery: Recovery = reported ? 'worker_exited' : 'lease_expired';
  const lostBy = owner ?? e?.owner;
  return {
    name: `reclaim ${row.worker_target}`,
    recovery,
    attributes: {
      'messaging.system': INBOX_SYSTEM,
      'messaging.destination.name': row.worker_target,
      'messaging.message.id': row.id,
      'gen_ai.agent.name': row.role,
      'holt.claim.id': row.claim_id,
      'holt.inbox.attempt': row.attempts,
      'holt.inbox.epoch': row.turn_epoch,
      ...(lostBy ? { 'holt.inbox.owner': lostBy } : {}),
      'holt.inbox.recovery': recovery,
      'holt.inbox.outcome': row.status === 'failed' ? 'failed' : 'retry',
      ...(e
        ? {
            'holt.worker.exit.code': e.exit_code,
            ...(e.signal ? { 'holt.worker.exit.signal': e.signal } : {}),
            ...(e.reason ? { 'holt.worker.exit.reason': e.reason } : {}),
            'holt.worker.exit.at_ms': e.at_ms,
          }
        : {}),
    },
  };
}
