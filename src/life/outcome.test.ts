import { describe, expect, it } from 'vitest';
import { backoffMs, recheckMs } from '../orchestrator/delivery.ts';
import { type Hop, hopOutcome } from './outcome.ts';

const T = '00000000-0000-4000-8000-000000000001';
const NEXT = '00000000-0000-4000-8000-000000000002';
const hop = (over: Partial<Hop>): Hop => ({
  turnId: T,
  turn: { status: 'done', summary: 'all done' },
  item: null,
  wait: null,
  ...over,
});

describe("a message's outcome, hop by hop (pure)", () => {
  it('follows the work item the turn made: working, input-required on an operator wait, completed with its report, canceled', () => {
    const item = { id: 'i1', state: 'open' as const, report: null };
    expect(hopOutcome(hop({ item }))).toEqual({ state: 'working', itemId: 'i1', turnId: T });
    expect(hopOutcome(hop({ item: { ...item, operatorWait: 'a go-ahead' } }))).toMatchObject({
      state: 'input_required',
      text: 'a go-ahead',
    });
    expect(
      hopOutcome(hop({ item: { ...item, state: 'completed', report: 'Build 7 is green.' } })),
    ).toMatchObject({
      state: 'completed',
      text: 'Build 7 is green.',
      itemId: 'i1',
    });
    expect(hopOutcome(hop({ item: { ...item, state: 'cancelled' } }))).toMatchObject({ state: 'canceled' });
  });

  it('without an item: the turn running is working, failed is failed, done is its final text', () => {
    expect(hopOutcome(hop({ turn: { status: 'running' } })).valueOf()).toMatchObject({ state: 'working' });
    expect(hopOutcome(hop({ turn: null }))).toMatchObject({ state: 'working' });
    expect(hopOutcome(hop({ turn: { status: 'failed', error: 'budget: out of money' } }))).toMatchObject({
      state: 'failed',
      text: 'budget: out of money',
    });
    expect(hopOutcome(hop({}))).toEqual({ state: 'completed', text: 'all done', turnId: T });
  });

  it('a turn that ended on a wait: working while it waits (input-required for an operator), else the turn it woke', () => {
    const wait = { kind: 'timer' as const, on: 'the build', state: 'waiting' as const, turnId: null };
    expect(hopOutcome(hop({ wait }))).toMatchObject({ state: 'working' });
    expect(hopOutcome(hop({ wait: { ...wait, kind: 'operator', on: 'approval' } }))).toMatchObject({
      state: 'input_required',
      text: 'approval',
    });
    expect(hopOutcome(hop({ wait: { ...wait, state: 'resolved', turnId: NEXT } }))).toEqual({ next: NEXT });
    expect(hopOutcome(hop({ wait: { ...wait, state: 'cancelled', turnId: NEXT } }))).toEqual({ next: NEXT });
  });
});

describe('delivery timing (pure)', () => {
  it('retries back off by doubling, capped, with bounded jitter', () => {
    const s = { retryBaseMs: 1000, maxBackoffMs: 60_000 };
    expect([1, 2, 3, 4].map((a) => backoffMs(a, s))).toEqual([1000, 2000, 4000, 8000]);
    expect(backoffMs(20, s)).toBe(60_000);
    expect(backoffMs(1, s, 0)).toBe(800);
    expect(backoffMs(1, s, 1)).toBe(1200);
  });
  it('an outcome not yet final is looked at again soon when young, at most once a minute when old', () => {
    expect(recheckMs(0)).toBe(500);
    expect(recheckMs(20_000)).toBe(2000);
    expect(recheckMs(86_400_000)).toBe(60_000);
  });
});
