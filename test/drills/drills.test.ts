import { describe, expect, it } from 'vitest';
import { type DrillResult, killDrill, lossDrill, outageDrill } from './world.ts';

// CI-sized fault drills: real processes, real SIGKILLs, the same invariants as bench/drills.

/**
 * Every tool run counted per (claim, role): each workflow runs its two steps at least once, and a
 * repeat is either one of the by-design windows (counted with its reason) or a failure.
 */
function noUnexpectedRuns(r: DrillResult): void {
  expect(r.runs).toBeGreaterThanOrEqual(2 * r.workflows);
  expect(r.dupRunsUnexpected, JSON.stringify(r.unexpected)).toBe(0);
  expect(r.runs).toBe(2 * r.workflows + r.dupRunsByDesign);
}

describe('fault drills (CI-sized)', () => {
  it('R1: the orchestrator process killed 5 times during 10 workflows: all finish, nothing granted or written twice', async () => {
    const r = await killDrill('R1 kill -9 orchestrator', 'orchestrator', {
      workflows: 10,
      kills: 5,
      seed: 11,
    });
    console.log(JSON.stringify(r));
    noUnexpectedRuns(r);
    expect(r).toMatchObject({ workflows: 10, finished: 10, lost: 0, duplicated: 0, kills: 5 });
  }, 240_000);

  it('R2: the pup killed 8 times mid-work during 10 workflows: exactly one result per claim', async () => {
    const r = await killDrill('R2 kill -9 pup', 'pup', { workflows: 10, kills: 8, seed: 12 });
    console.log(JSON.stringify(r));
    noUnexpectedRuns(r);
    expect(r).toMatchObject({ workflows: 10, finished: 10, lost: 0, duplicated: 0, kills: 8 });
  }, 240_000);

  it('R2: the inbox worker killed 8 times mid-claim during 10 scalable workflows: exactly one result per claim', async () => {
    const r = await killDrill('R2 kill -9 inbox worker', 'pup', {
      workflows: 10,
      kills: 8,
      seed: 13,
      scalable: true,
    });
    console.log(JSON.stringify(r));
    noUnexpectedRuns(r);
    expect(r).toMatchObject({ workflows: 10, finished: 10, lost: 0, duplicated: 0, kills: 8 });
  }, 240_000);

  it('R3: Redis, NATS and Postgres each down for 3 s mid-run: all work finishes; probes say so during, and recover', async () => {
    // Longer than the probes' 2 s bound on a store call, so a sample sees the store gone for sure.
    const r = await outageDrill({ workflows: 10, downMs: 3_000 });
    console.log(JSON.stringify(r));
    noUnexpectedRuns(r);
    expect(r).toMatchObject({ workflows: 10, finished: 10, lost: 0, duplicated: 0 });
    const by = Object.fromEntries(r.outages.map((x) => [x.store, x]));
    // Redis down: not alive (its pod restarts); NATS or Postgres down: alive but not ready.
    expect(by.redis?.healthz_during).toContain(503);
    expect(by.nats?.readyz_during).toContain(503);
    expect(by.postgres?.readyz_during).toContain(503);
    expect(by.nats?.healthz_during).not.toContain(503);
    expect(by.postgres?.healthz_during).not.toContain(503);
  }, 240_000);

  it('R4: Redis restored from an older snapshot mid-run: the lost outputs are found and re-run; nothing hangs', async () => {
    const r = await lossDrill({ workflows: 10 });
    console.log(JSON.stringify(r));
    noUnexpectedRuns(r);
    expect(r).toMatchObject({ workflows: 10, finished: 10, lost: 0, duplicated: 0 });
    // Detected and reported: rows done after the snapshot lost their outputs, and were reopened.
    expect(r.reopened).toBeGreaterThan(0);
  }, 240_000);
});
