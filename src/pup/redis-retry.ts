import { retry } from '../common/backoff.ts';
import type { Logger } from '../common/logger.ts';

/** A Redis call retried with backoff (HOLT_REDIS_RETRIES tries), each retry logged as `redis_retry`. */
export function redisRetry<T>(tries: number, log: Logger, what: string, fn: () => Promise<T>): Promise<T> {
  return retry(fn, {
    tries,
    onRetry: (e, attempt, delayMs) =>
      log.warn({ event_type: 'redis_retry', op: what, attempt, delay_ms: delayMs, error: String(e) }),
  });
}
