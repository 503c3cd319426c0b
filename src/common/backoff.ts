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

/** Exponential backoff with full jitter: delay_n = random(0, min(max, base * 2^n)). */
export function backoffDelay(attempt: number, baseMs = 100, maxMs = 10_000): number {
  return Math.round(Math.random() * Math.min(maxMs, baseMs * 2 ** attempt));
}

/**
 * The pause after the n-th error in a row (n ≥ 1): base · 2^(n-1), capped, with equal jitter (half
 * fixed, half random) so it is never near zero: what stops a failing step from spinning.
 */
export function errorPause(n: number, baseMs = 1_000, maxMs = 60_000): number {
  const d = Math.min(maxMs, baseMs * 2 ** Math.max(0, n - 1));
  return Math.round(d / 2 + Math.random() * (d / 2));
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
