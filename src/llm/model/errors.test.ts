import { describe, expect, it } from 'vitest';
import { classifyModelFailure, isRetryableClass, pausesAtOnce } from './errors.ts';

describe('error classes: a model call failure says what kind it is, and so what to do', () => {
  it('classifies by status, provider code and text', () => {
    const c = (status: number | undefined, message = 'x', code?: string) =>
      classifyModelFailure({ status, message, code });
    expect(c(undefined, 'connect ECONNREFUSED')).toBe('transient');
    expect(c(401, 'Incorrect API key provided')).toBe('auth');
    expect(c(403)).toBe('auth');
    expect(c(402)).toBe('quota');
    expect(c(429, 'You exceeded your current quota, please check your plan and billing')).toBe('quota');
    expect(c(429, 'x', 'insufficient_quota')).toBe('quota');
    expect(c(429, 'Rate limit reached for requests')).toBe('transient');
    expect(c(408)).toBe('transient');
    expect(c(503)).toBe('transient');
    expect(c(404, 'The model `gpt-9` does not exist')).toBe('config');
    expect(c(400, 'Unrecognized request argument supplied: foo')).toBe('config');
    expect(c(400, "This model's maximum context length is 8192 tokens")).toBe('model_output');
    expect(c(400, 'x', 'context_length_exceeded')).toBe('model_output');
  });

  it('only a transient failure is retried; config, auth and quota pause the agent at once', () => {
    expect(isRetryableClass('transient')).toBe(true);
    for (const c of ['config', 'auth', 'quota', 'model_output', 'tool'] as const)
      expect(isRetryableClass(c)).toBe(false);
    expect(
      ['config', 'auth', 'quota', 'transient', 'model_output', 'tool'].filter((c) =>
        pausesAtOnce(c as never),
      ),
    ).toEqual(['config', 'auth', 'quota']);
  });
});
