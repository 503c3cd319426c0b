import { describe, expect, it } from 'vitest';
import { killDrill } from './world.ts';

// CI-sized fault drills: real processes, real SIGKILLs, the same invariants as bench/drills.

describe('fault drills (CI-sized)', () => {
  it('R1: the orchestrator process killed 5 times during 10 workflows: all finish, nothing granted or written twice', async () => {
    const r = await killDrill('R1 kill -9 orchestrator', 'orchestrator', {
      workflows: 10,
      kills: 5,
      seed: 11,
    });
    console.log(JSON.stringify(r));
    expect(r).toMatchObject({ workflows: 10, finished: 10, lost: 0, duplicated: 0, kills: 5 });
  }, 240_000);

  it('R2: the pup killed 8 times mid-work during 10 workflows: exactly one result per claim', async () => {
    const r = await killDrill('R2 kill -9 pup', 'pup', { workflows: 10, kills: 8, seed: 12 });
    console.log(JSON.stringify(r));
    expect(r).toMatchObject({ workflows: 10, finished: 10, lost: 0, duplicated: 0, kills: 8 });
  }, 240_000);
});
