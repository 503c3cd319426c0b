import { describe, expect, it } from 'vitest';
import { BidWatch } from './bids.ts';

describe('BidWatch: when a claim collecting bids steps again', () => {
  it('a claim on its timer steps again only when its last awaited bidder has bid', () => {
    const w = new BidWatch(100);
    w.stepStarted('c', false);
    expect(w.waited('c', 0, ['a', 'b', 'c'])).toEqual({ again: false, pollMs: 100, newBids: true });
    expect(w.arrived('c', 'a')).toBe(false);
    expect(w.arrived('c', 'b')).toBe(false);
    expect(w.arrived('c', 'c')).toBe(true);
    // A bid event naming no bidder, or for a claim it knows nothing of: step, to be safe.
    expect(w.arrived('c', undefined)).toBe(true);
    expect(w.arrived('other', 'a')).toBe(true);
  });

  it('bids heard during a step are taken off what it read: none left means step again at once', () => {
    const w = new BidWatch(100);
    w.stepStarted('c', false);
    expect(w.duringStep('c', 'a')).toBe(true);
    expect(w.duringStep('c', 'b')).toBe(true);
    expect(w.waited('c', 0, ['a', 'b'])).toEqual({ again: true });
    // With one still missing it waits, for that one only.
    w.stepStarted('c', false);
    w.duringStep('c', 'a');
    expect(w.waited('c', 0, ['a', 'b'])).toMatchObject({ again: false });
    expect(w.arrived('c', 'b')).toBe(true);
    expect(w.duringStep('c', undefined)).toBe(false);
  });

  it('a step that reads drops what was heard before it; one that does not read counts the early bids', () => {
    const w = new BidWatch(100);
    w.beforeStep('c', 'a');
    w.stepStarted('c', false); // its read includes a's bid
    expect(w.waited('c', 1, ['b'])).toMatchObject({ again: false });
    const fresh = new BidWatch(100);
    fresh.beforeStep('n', 'a');
    fresh.beforeStep('n', 'b');
    fresh.stepStarted('n', true); // decided on the claim as created: no bids read
    expect(fresh.waited('n', 0, ['a', 'b'])).toEqual({ again: true });
    // Early bids outlive one reconcile pass (the claim's creation may still be in flight), not two.
    fresh.beforeStep('m', 'a');
    fresh.beforeStep('k', 'a');
    fresh.expireEarly();
    fresh.stepStarted('k', true);
    expect(fresh.waited('k', 0, ['a'])).toEqual({ again: true });
    fresh.expireEarly();
    fresh.stepStarted('m', true);
    expect(fresh.waited('m', 0, ['a'])).toMatchObject({ again: false });
  });

  it('the poll doubles while it finds nothing new, up to 16 times, and starts over on a new bid', () => {
    const w = new BidWatch(100);
    const polls: number[] = [];
    const step = (count: number) => {
      w.stepStarted('c', false);
      const r = w.waited('c', count, ['z']);
      if (!r.again) polls.push(r.pollMs);
    };
    for (let i = 0; i < 7; i++) step(0);
    step(1);
    step(1);
    expect(polls).toEqual([100, 200, 400, 800, 1600, 1600, 1600, 100, 200]);
  });
});
