import { describe, expect, it } from 'vitest';
import { workersOf } from './scale.ts';

describe("a role's worker processes among the supervisor's components", () => {
  it('are its own numbered workers: not their tool runners, not a role whose name has the same length', () => {
    const names = [
      'A',
      'A-worker-0',
      'A-worker-0-tools',
      'A-worker-12',
      'B-worker-1',
      'AB-worker-2',
      'A-worker-x',
    ];
    expect(workersOf(names, 'A')).toEqual([
      { name: 'A-worker-0', index: 0 },
      { name: 'A-worker-12', index: 12 },
    ]);
    expect(workersOf(names, 'B')).toEqual([{ name: 'B-worker-1', index: 1 }]);
  });
});
