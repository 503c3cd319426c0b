import { setTimeout as sleep } from 'node:timers/promises';

export interface RetryOptions {
  tries?: number;
  baseMs?: number;
  maxMs?: number;
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  /** Whether an error is worth another try (default: every error is). */
  retryIf?: (error: unknown) => boolean;
  signal?: AbortSignal;
}

/**
 * The one exponential backoff: base · 2^attempt (attempt from 0), capped at max, then jittered.
 * `full`: random in [0, d] (retries of many clients spread out); `equal`: half fixed, half random (never
 * near zero: what stops a failing step from spinning); `none`: d itself, for pure decisions that are
 * tested to the millisecond (the inbox's retry policy, the operator's queues and watches).
 */
export function backoffMs(
  attempt: number,
  o: { baseMs: number; maxMs: number; jitter: 'full' | 'equal' | 'none' },
): number {
  const d = Math.min(o.maxMs, o.baseMs * 2 ** Math.min(Math.max(0, attempt), 62));
  if (o.jitter === 'none') return d;
  return Math.round(o.jitter === 'full' ? Math.random() * d : d / 2 + Math.random() * (d / 2));
}

/** Exponential backoff with full jitter: delay_n = random(0, min(max, base * 2^n)). */
export function backoffDelay(attempt: number, baseMs = 100, maxMs = 10_000): number {
  return backoffMs(attempt, { baseMs, maxMs, jitter: 'full' });
}

/**
 * The pause after the n-th error in a row (n ≥ 1): base · 2^(n-1), capped, with equal jitter (half
 * fixed, half random) so it is never near zero: what stops a failing step from spinning.
 */
export function errorPause(n: number, baseMs = 1_000, maxMs = 60_000): number {
  return backoffMs(n - 1, { baseMs, maxMs, jitter: 'equal' });
}

/** Runs `fn` up to `tries` times, sleeping with backoff between failures; rethrows the last error. */
export async function retry<T>(fn: () => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const tries = opts.tries ?? 3;
  let last: unknown;
  for (let attempt = 0; attempt < tries; attempt++) {
    try {
      return await fn();
    } catch (e) {
      last = e;
      if (attempt === tries - 1 || opts.signal?.aborted || opts.retryIf?.(e) === false) break;
      const d = backoffDelay(attempt, opts.baseMs, opts.maxMs);
      opts.onRetry?.(e, attempt + 1, d);
      await sleep(d, undefined, { signal: opts.signal }).catch(() => undefined);
    }
  }
  throw last;
}
