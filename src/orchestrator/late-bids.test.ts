import { describe, expect, it } from 'vitest';
import { LateBids } from './late-bids.ts';

describe('LateBids', () => {
  it('reports each silent bidder once, by how late, and nothing else', () => {
    const late = new LateBids();
    late.closedWithout('c1', ['Slow', 'Hung'], 1_000, 700);
    late.closedWithout('c2', [], 1_000);
    expect(late.heard('c1', 'Coder', 1_500)).toBeNull();
    expect(late.heard('c1', undefined, 1_500)).toBeNull();
    expect(late.heard('c2', 'Slow', 1_500)).toBeNull();
    expect(late.heard('c1', 'Slow', 1_250)).toEqual({ lateByMs: 250, latencyMs: 550 });
    expect(late.heard('c1', 'Slow', 1_300)).toBeNull();
    expect(late.heard('c1', 'Hung', 900)).toEqual({ lateByMs: 0, latencyMs: 200 });
    expect(late.heard('c1', 'Hung', 2_000)).toBeNull();
  });
});
