import { describe, expect, it } from 'vitest';
import { completionProblem, countByReadiness, readiness } from './items.ts';
import { workItem } from './testkit.ts';

describe('work items: readiness is derived, never stored', () => {
  it('runnable, waiting (timer, operator, external), blocked by an open item, completed', () => {
    const other = workItem();
    const states = new Map([[other.id, other.state]]);
    expect(readiness(workItem(), 100, states)).toEqual({ kind: 'runnable' });
    expect(readiness(workItem({ state: 'completed' }), 100, states)).toEqual({ kind: 'completed' });
    expect(readiness(workItem({ recheckAtMs: 500 }), 100, states)).toEqual({
      kind: 'waiting',
      wait: 'timer',
      on: 'recheck_at',
      untilMs: 500,
    });
    expect(readiness(workItem({ planStatus: 'needs_input' }), 100, states)).toMatchObject({
      kind: 'waiting',
      wait: 'operator',
    });
    expect(
      readiness(
        workItem({ blockedBy: [{ kind: 'wait', wait: 'external', on: 'CI run 7', deadlineMs: 900 }] }),
        100,
        states,
      ),
    ).toEqual({ kind: 'waiting', wait: 'external', on: 'CI run 7', untilMs: 900 });
    expect(readiness(workItem({ blockedBy: [{ kind: 'item', id: other.id }] }), 100, states)).toEqual({
      kind: 'blocked',
      by: [other.id],
    });
    // An item that is done, or gone, blocks nothing.
    expect(
      readiness(
        workItem({ blockedBy: [{ kind: 'item', id: other.id }] }),
        100,
        new Map([[other.id, 'completed' as const]]),
      ),
    ).toEqual({
      kind: 'runnable',
    });
  });

  it('a wait past its deadline and a recheck_at in the past make an item runnable, saying why', () => {
    const waiting = workItem({ blockedBy: [{ kind: 'wait', wait: 'task', on: 'build 12', deadlineMs: 50 }] });
    expect(readiness(waiting, 100, new Map())).toEqual({
      kind: 'runnable',
      why: 'the task wait on build 12 timed out',
    });
    const stuck = workItem({
      blockedBy: [{ kind: 'wait', wait: 'external', on: 'webhook' }],
      recheckAtMs: 90,
    });
    expect(readiness(stuck, 100, new Map())).toEqual({ kind: 'runnable', why: 'recheck_at passed' });
  });

  it('counts by readiness, and a completion needs a report and an open item', () => {
    const a = workItem();
    const b = workItem({ blockedBy: [{ kind: 'item', id: a.id }] });
    expect(
      countByReadiness([a, b, workItem({ state: 'cancelled' }), workItem({ recheckAtMs: 1e12 })], 100),
    ).toEqual({
      runnable: 1,
      waiting: 1,
      blocked: 1,
      completed: 1,
    });
    expect(completionProblem(a, '  ')).toMatch(/needs a completion report/);
    expect(completionProblem(workItem({ state: 'completed' }), 'done')).toMatch(/already completed/);
    expect(completionProblem(a, 'Fixed the crash; root cause was X.')).toBeNull();
  });
});
