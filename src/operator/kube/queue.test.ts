import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
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

  it('a run that never returns gives up its slot: other keys go on, the slow key never runs twice at once', async () => {
    let release: () => void = () => {};
    const hung = new Promise<void>((r) => {
      release = r;
    });
    const runs: string[] = [];
    const slow: string[] = [];
    let aRunning = 0;
    let maxA = 0;
    const q = new WorkQueue(
      async (k) => {
        runs.push(k);
        if (k === 'a') {
          maxA = Math.max(maxA, ++aRunning);
          if (runs.filter((r) => r === 'a').length === 1) await hung;
          aRunning--;
        }
        return undefined;
      },
      { concurrency: 1, slotTimeoutMs: 30, onSlow: (k) => slow.push(k) },
    );
    q.start();
    q.add('a');
    q.add('b');
    // With one slot, b runs only because a gave its slot up.
    await eventually('b to run beside the hung a', () => (runs.includes('b') ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 5,
    });
    expect(slow).toEqual(['a']);
    q.add('a'); // a is still running: not run again beside itself
    q.add('c');
    await eventually('c to run', () => (runs.includes('c') ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 5,
    });
    expect(runs.filter((r) => r === 'a')).toHaveLength(1);
    release();
    // Once the slow run ends, a runs again (what it was doing may not have finished).
    await eventually(
      'a second run of a',
      () => (runs.filter((r) => r === 'a').length === 2 ? true : undefined),
      {
        timeoutMs: 10_000,
        intervalMs: 5,
      },
    );
    await q.idle();
    expect(maxA).toBe(1);
    await q.stop();
  });

  it('retries errors with per-key exponential backoff and honours requeueAfter', async () => {
    const times: number[] = [];
    const scheduled: number[] = [];
    let n = 0;
    const q: WorkQueue = new WorkQueue(
      async () => {
        times.push(Date.now());
        if (++n < 4) {
          // The delay the queue will wait before the next try (recorded, not measured: no timing race).
          scheduled.push(q.backoffMs('k'));
          throw new Error('boom');
        }
        return n === 4 ? { requeueAfterMs: 30 } : undefined;
      },
      { baseDelayMs: 10 },
    );
    q.start();
    q.add('k');
    await eventually('the fifth run', () => (n >= 5 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 5,
    });
    await q.stop();
    expect(n).toBe(5);
    expect(scheduled).toEqual([10, 20, 40]);
    // A success resets the key's backoff.
    expect(q.backoffMs('k')).toBe(10);
    // The requeue came no earlier than asked (a lower bound, which load can only make longer).
    expect((times[4] ?? 0) - (times[3] ?? 0)).toBeGreaterThanOrEqual(25);
  });
});
