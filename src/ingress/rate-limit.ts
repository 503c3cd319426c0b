/**
 * A token bucket per ingress token (pure): `perMinute` requests in a burst, refilled evenly. Decides
 * whether a request at `nowMs` may pass and, if not, when the next one could.
 */
export interface Bucket {
  tokens: number;
  atMs: number;
}

export function take(
  b: Bucket | undefined,
  nowMs: number,
  perMinute: number,
): { ok: boolean; bucket: Bucket; retryAfterMs: number } {
  const perMs = perMinute / 60_000;
  const start = b ?? { tokens: perMinute, atMs: nowMs };
  const tokens = Math.min(perMinute, start.tokens + Math.max(0, nowMs - start.atMs) * perMs);
  if (tokens >= 1) return { ok: true, bucket: { tokens: tokens - 1, atMs: nowMs }, retryAfterMs: 0 };
  return { ok: false, bucket: { tokens, atMs: nowMs }, retryAfterMs: Math.ceil((1 - tokens) / perMs) };
}
