import { describe, expect, it } from 'vitest';
import { decide, initialState, persistedLastActive, type ScalePolicy } from './decide.ts';

const P: ScalePolicy = {
  minReplicas: 0,
  maxReplicas: 10,
  activationBacklog: 0,
  targetBacklogPerReplica: 2,
  cooldownSeconds: 300,
  stabilizationSeconds: 60,
  fallbackReplicas: 3,
  fallbackAfterFailures: 3,
};
const ok = (pending: number, inFlight = 0) => ({ ok: true as const, pending, inFlight });
const T = 1_000_000;

describe('decide (KEDA semantics)', () => {
  it('activation: 0 -> 1 only above the activation backlog', () => {
    expect(decide(P, 0, ok(0), initialState(), T).replicas).toBe(0);
    const d = decide({ ...P, activationBacklog: 2 }, 0, ok(2), initialState(), T);
    expect([d.replicas, d.active]).toEqual([0, false]);
    const up = decide(P, 0, ok(1), initialState(), T);
    expect([up.replicas, up.reason, up.active, up.state.lastActiveTime]).toEqual([1, 'activation', true, T]);
  });

  it('target: ceil(backlog / target) for 1 <-> N, counting in-flight work', () => {
    expect(decide(P, 1, ok(5), initialState(), T)).toMatchObject({ replicas: 3, reason: 'target' });
    expect(decide(P, 1, ok(3, 4), initialState(), T).replicas).toBe(4);
  });

  it('maximum: never above maxReplicas; minimum respected', () => {
    expect(decide(P, 1, ok(500), initialState(), T)).toMatchObject({ replicas: 10, reason: 'maximum' });
    expect(decide({ ...P, minReplicas: 2 }, 2, ok(0), initialState(), T)).toMatchObject({
      replicas: 2,
      reason: 'minimum',
    });
    expect(
      decide({ ...P, fallbackReplicas: 50 }, 1, { ok: false }, { ...initialState(), failures: 5 }, T)
        .replicas,
    ).toBe(10);
  });

  it('cooldown applies only towards zero', () => {
    const active = decide(P, 0, ok(4), initialState(), T).state;
    // Idle 100 s later: still within the cooldown, so it keeps one replica.
    const hold = decide(P, 2, ok(0), active, T + 100_000);
    expect(hold).toMatchObject({ reason: 'cooldown' });
    expect(hold.replicas).toBeGreaterThanOrEqual(1);
    // After the cooldown: zero at once (no stabilisation on the way to zero).
    expect(decide(P, 1, ok(0), hold.state, T + 301_000)).toMatchObject({ replicas: 0, reason: 'idle' });
    // Never had activity (no lastActiveTime): nothing to cool down.
    expect(decide(P, 1, ok(0), initialState(), T).replicas).toBe(0);
  });

  it('stabilisation: scale-in goes to the highest recommendation of the window; scale-out is immediate', () => {
    let s = decide(P, 0, ok(10), initialState(), T).state; // 5
    const in1 = decide(P, 5, ok(2), s, T + 10_000); // wants 1, window holds 5
    expect(in1).toMatchObject({ replicas: 5, reason: 'stabilization' });
    s = in1.state;
    expect(decide(P, 5, ok(2), s, T + 61_000).replicas).toBe(1);
    expect(decide(P, 1, ok(20), s, T + 11_000).replicas).toBe(10);
  });

  it('fallback: after N failed reads hold fallbackReplicas; before that keep the current count', () => {
    let s = initialState();
    for (const [i, want] of [
      [1, 4],
      [2, 4],
      [3, 3],
    ] as const) {
      const d = decide(P, 4, { ok: false }, s, T + i);
      expect([d.replicas, d.fallback, d.state.failures]).toEqual([want, i >= 3, i]);
      s = d.state;
    }
    const noFallback = decide(
      { ...P, fallbackReplicas: undefined },
      4,
      { ok: false },
      { ...s, failures: 9 },
      T,
    );
    expect([noFallback.replicas, noFallback.reason]).toEqual([4, 'read-failed']);
    // A successful read resets the failure count.
    expect(decide(P, 3, ok(1), s, T).state.failures).toBe(0);
  });
});

describe('persistedLastActive (what status keeps, so a busy pool is not a status write per tick)', () => {
  const at = (ms: number) => ({ ...initialState(ms) });
  it('nothing remembered: keeps what is stored', () => {
    expect(persistedLastActive(undefined, initialState(), false, 300)).toBeUndefined();
    expect(persistedLastActive(T, initialState(), false, 300)).toBe(T);
  });
  it('first activity is stored at once', () => {
    expect(persistedLastActive(undefined, at(T), true, 300)).toBe(T);
  });
  it('while active: unchanged until half the cooldown has passed (at least 1 s)', () => {
    expect(persistedLastActive(T, at(T + 10_000), true, 300)).toBe(T);
    expect(persistedLastActive(T, at(T + 149_999), true, 300)).toBe(T);
    expect(persistedLastActive(T, at(T + 150_000), true, 300)).toBe(T + 150_000);
    expect(persistedLastActive(T, at(T + 999), true, 0)).toBe(T);
    expect(persistedLastActive(T, at(T + 1_000), true, 0)).toBe(T + 1_000);
  });
  it('activity ended: the last active moment is stored once, then nothing moves', () => {
    expect(persistedLastActive(T, at(T + 10_000), false, 300)).toBe(T + 10_000);
    expect(persistedLastActive(T + 10_000, at(T + 10_000), false, 300)).toBe(T + 10_000);
    // Status holds whole seconds: a sub-second difference is no change.
    expect(persistedLastActive(T, at(T + 400), false, 300)).toBe(T);
  });
});
