import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../model/model.ts';
import { MAX_OBSERVATIONS, salientObservations, wentWrong } from './remember.ts';

const asked = (id: string, name: string): ChatMessage => ({
  role: 'assistant',
  content: '',
  tool_calls: [{ id, type: 'function', function: { name, arguments: '{}' } }],
});
const answered = (id: string, content: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content });

describe('salient observations (pure)', () => {
  it('a tool went wrong when it failed, timed out, was cancelled or exited non-zero; not when the runtime refused the call', () => {
    expect(wentWrong({ tool: 'search', outcome: 'tool_error' })).toBe(true);
    expect(wentWrong({ tool: 'lookup', outcome: 'timed_out' })).toBe(true);
    expect(wentWrong({ tool: 'lookup', outcome: 'cancelled' })).toBe(true);
    expect(wentWrong({ tool: 'build', outcome: 'ok', exit_code: 3 })).toBe(true);
    expect(wentWrong({ tool: 'build', outcome: 'ok', exit_code: 0 })).toBe(false);
    expect(wentWrong({ tool: 'nope', outcome: 'unknown_tool' })).toBe(false);
    expect(wentWrong({ tool: 'x', outcome: 'invalid_args' })).toBe(false);
    expect(wentWrong(null)).toBe(false);
  });

  it('keeps what the tools that went wrong answered, named by tool, the latest few', () => {
    const messages: ChatMessage[] = [];
    for (let i = 0; i < 5; i++)
      messages.push(asked(`c${i}`, `tool${i}`), answered(`c${i}`, `error: failure ${i}`));
    messages.push(asked('ok', 'fine'), answered('ok', 'all good'));
    const wrong = new Set(['c0', 'c1', 'c2', 'c3', 'c4']);
    expect(salientObservations(messages, wrong)).toEqual(
      [2, 3, 4].map((i) => `tool${i} said: error: failure ${i}`),
    );
    expect(MAX_OBSERVATIONS).toBe(3);
    expect(salientObservations(messages, new Set())).toEqual([]);
    expect(
      salientObservations([asked('a', 'build'), answered('a', 'x'.repeat(1000))], new Set(['a']))[0],
    ).toHaveLength('build said: '.length + 400);
  });
});
