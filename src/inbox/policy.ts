import { backoffMs } from '../common/backoff.ts';

// Pure decisions of the inbox: no I/O here, so each rule is testable on its own.

/** `svc1_*` targets are consumed by exactly one process (docs/agent-worker.md § Doorbells). */
export function isSingleConsumer(target: string): boolean {
  return target.startsWith('svc1_');
}

export interface RetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1000, maxDelayMs: 60_000 };

/** What a failed attempt becomes: retried after a backoff, or failed for good. */
export function afterFailure(
  attempts: number,
  retryable: boolean,
  p: RetryPolicy,
): { status: 'pending'; delayMs: number } | { status: 'failed' } {
  if (!retryable || attempts >= p.maxAttempts) return { status: 'failed' };
  return {
    status: 'pending',
    delayMs: backoffMs(attempts - 1, { baseMs: p.baseDelayMs, maxMs: p.maxDelayMs, jitter: 'none' }),
  };
}

/** How many doorbells the watchdog rings for a target: one per due row, capped (a hint, not a count). */
export function ringsFor(dueRows: number, cap = 64): number {
  return Math.min(Math.max(0, dueRows), cap);
}

/** Percentile of a sorted sample (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}
