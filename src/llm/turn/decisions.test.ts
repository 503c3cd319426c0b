import { describe, expect, it } from 'vitest';
import type { ToolCall } from '../model/model.ts';
import { endOfStep } from './ending.ts';
import { screenCall } from './refusal.ts';
import { initialCtl } from './state.ts';

const call = (name: string, args = '{}', id = 'call_3_0'): ToolCall => ({
  id,
  type: 'function',
  function: { name, arguments: args },
});
const limits = { maxSteps: 8, mustEndWith: undefined, maxToolCallsPerReply: 4 };
const offered = ['lint', 'submit_result'];

describe('screenCall: whether a call may run at all (pure)', () => {
  it('a known tool with object arguments runs, with its arguments', () => {
    expect(screenCall(call('lint', '{"path":"a"}'), { llmSteps: 1, settings: limits, offered })).toEqual({
      ok: true,
      args: { path: 'a' },
    });
  });
  it('on the last step only the calls that end the turn run', () => {
    const last = { llmSteps: 8, settings: limits, offered };
    expect(screenCall(call('lint'), last)).toMatchObject({ ok: false, outcome: 'refused' });
    expect(screenCall(call('submit_result'), last)).toMatchObject({ ok: true });
  });
  it('calls past the per-reply bound are not run, and the model is told to call again later', () => {
    const r = screenCall(call('lint', '{}', 'call_3_4'), { llmSteps: 1, settings: limits, offered });
    expect(r).toMatchObject({ ok: false, outcome: 'refused' });
    expect(r.ok || r.content).toContain('at most 4 tool calls');
  });
  it('submit_result is refused where must_end_with names another tool', () => {
    const r = screenCall(call('submit_result'), {
      llmSteps: 1,
      settings: { ...limits, mustEndWith: 'publish' },
      offered: ['publish', 'submit_result'],
    });
    expect(r).toMatchObject({ ok: false, outcome: 'refused' });
    expect(r.ok || r.content).toContain('ends only with publish');
  });
  it('a tool the turn does not offer is unknown, and the offered ones are listed', () => {
    const r = screenCall(call('rm'), { llmSteps: 1, settings: limits, offered });
    expect(r).toMatchObject({ ok: false, outcome: 'unknown_tool' });
    expect(r.ok || r.content).toContain('Available: lint, submit_result');
  });
  it('arguments that are not a JSON object are invalid', () => {
    for (const args of ['not json', '[1]'])
      expect(screenCall(call('lint', args), { llmSteps: 1, settings: limits, offered })).toMatchObject({
        ok: false,
        outcome: 'invalid_args',
      });
  });
});

describe('endOfStep: how the last step ends the turn (pure)', () => {
  const turn = { claimType: 'exclusive' as const, resultType: 'CodeCommit', transcript: () => 'T' };
  it('nothing ends a turn that is still going', () => {
    expect(endOfStep(initialCtl(), turn)).toBeUndefined();
  });
  it('a failure ends it with its class (transient when none was named) and the transcript', () => {
    expect(endOfStep({ ...initialCtl(), failed: { reason: 'r' } }, turn)).toEqual({
      kind: 'failure',
      reason: 'r',
      transcript: 'T',
      errorClass: 'transient',
    });
  });
  it('a submitted result is the result as submitted; a review without a structural type is a Review', () => {
    const submitted = { artefact_type: 'Plan', artefact_payload: 'p', summary: 's' };
    expect(endOfStep({ ...initialCtl(), submitted }, turn)).toMatchObject({
      kind: 'result',
      result: { type: 'Plan', payload: 'p', summary: 's', structural_type: undefined },
    });
    expect(endOfStep({ ...initialCtl(), submitted }, { ...turn, claimType: 'review' })).toMatchObject({
      result: { structural_type: 'Review' },
    });
  });
  it("a terminating tool's output and the model's final text take the agent's result type, or Review", () => {
    const ended = { ...initialCtl(), endedBy: { tool: 'publish', output: 'out' } };
    expect(endOfStep(ended, turn)).toMatchObject({
      result: { type: 'CodeCommit', payload: 'out', summary: 'ended by publish' },
    });
    const final = { ...initialCtl(), finalText: 'done' };
    expect(endOfStep(final, { ...turn, claimType: 'review' })).toMatchObject({
      result: { type: 'Review', payload: 'done' },
    });
  });
});
