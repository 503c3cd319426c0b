import { describe, expect, it } from 'vitest';
import { backoffMs, errorPause } from './backoff.ts';

describe('backoffMs: the one exponential backoff', () => {
  it('doubles from the base, capped at the max; attempts below 0 count as 0', () => {
    const o = { baseMs: 100, maxMs: 1_000, jitter: 'none' as const };
    expect([-1, 0, 1, 2, 3, 4, 99, 5000].map((n) => backoffMs(n, o))).toEqual([
      100, 100, 200, 400, 800, 1000, 1000, 1000,
    ]);
  });
  it('full jitter stays within [0, d]; equal jitter within [d/2, d]', () => {
    for (let i = 0; i < 200; i++) {
      const full = backoffMs(3, { baseMs: 100, maxMs: 10_000, jitter: 'full' });
      const equal = backoffMs(3, { baseMs: 100, maxMs: 10_000, jitter: 'equal' });
      expect(full).toBeGreaterThanOrEqual(0);
      expect(full).toBeLessThanOrEqual(800);
      expect(equal).toBeGreaterThanOrEqual(400);
      expect(equal).toBeLessThanOrEqual(800);
    }
  });
  it('errorPause: the n-th error in a row (n ≥ 1) waits base · 2^(n-1), half of it fixed', () => {
    expect(errorPause(1, 1000, 60_000)).toBeGreaterThanOrEqual(500);
    expect(errorPause(7, 1000, 60_000)).toBeGreaterThanOrEqual(30_000);
  });
});
