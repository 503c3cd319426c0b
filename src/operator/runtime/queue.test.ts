import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { WorkQueue } from './queue.ts';

describe('WorkQueue', () => {
  it('dedupes a burst, never runs a key twice at once, re-runs a key added while running', async () => {
    const runs: string[] = [];
    let concurrentA = 0;
    let maxA = 0;
    const q = new WorkQueue(
      async (k) => {
        runs.push(k);
        if (k === 'a') {
          maxA = Math.max(maxA, ++concurrentA);
          await sleep(20);
          concurrentA--;
        }
        return undefined;
      },
      { concurrency: 4 },
    );
    for (let i = 0; i < 10; i++) q.add('a');
    q.add('b');
    q.start();
    await sleep(5);
    q.add('a'); // while running: dirty, runs once more afterwards
    await sleep(60);
    await q.idle();
    expect(runs.filter((r) => r === 'a').length).toBe(2);
    expect(runs.filter((r) => r === 'b').length).toBe(1);
    expect(maxA).toBe(1);
    await q.stop();
  });

  it('retries errors with per-key exponential backoff and honours requeueAfter', async () => {
    const times: number[] = [];
    let n = 0;
    const q = new WorkQueue(
      async () => {
        times.push(Date.now());
        if (++n < 4) throw new Error('boom');
        return n === 4 ? { requeueAfterMs: 30 } : undefined;
      },
      { baseDelayMs: 10 },
    );
    q.start();
    q.add('k');
    await sleep(250);
    await q.stop();
    expect(n).toBe(5);
    const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0));
    // 10, 20, 40 ms backoff, then the 30 ms requeue.
    expect(gaps[1]).toBeGreaterThan((gaps[0] ?? 0) * 1.3);
    expect(gaps[2]).toBeGreaterThan((gaps[1] ?? 0) * 1.3);
    expect(gaps[3]).toBeGreaterThanOrEqual(25);
  });
});
