import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../model/model.ts';
import {
  COMPACTION_SLACK,
  compactionCut,
  SUMMARY_HEADER,
  summaryMessage,
  summaryRequest,
} from './compaction.ts';
import { foldSteps } from './state.ts';

const head: ChatMessage[] = [
  { role: 'system', content: 'sys' },
  { role: 'user', content: 'goal' },
];
/** n exchanges: an assistant call and its tool result each. */
const exchanges = (n: number, from = 0): ChatMessage[] =>
  Array.from({ length: n }, (_, i) => [
    {
      role: 'assistant' as const,
      content: '',
      tool_calls: [
        {
          id: `c${from + i}`,
          type: 'function' as const,
          function: { name: 'count', arguments: `{"i":${from + i}}` },
        },
      ],
    },
    { role: 'tool' as const, tool_call_id: `c${from + i}`, content: `run ${from + i}` },
  ]).flat();

describe('context compaction', () => {
  it('cuts at an assistant message, keeping the last `keep` exchanges, once the slack is used up', () => {
    expect(compactionCut([...head, ...exchanges(2 + COMPACTION_SLACK)], 2, 2)).toBeUndefined();
    const msgs = [...head, ...exchanges(5)];
    const cut = compactionCut(msgs, 2, 2);
    expect(cut).toBe(2 + 3 * 2);
    expect(msgs[cut!]).toMatchObject({ role: 'assistant' });
    expect(compactionCut(msgs, 2, 0)).toBeUndefined(); // off
  });

  it('a compaction step folds to head + summary + kept exchanges, and a later one replaces the summary', () => {
    const steps = [
      { seq: 0, metadata: { messages: head, ctl: { headLength: 2 } } },
      { seq: 1, metadata: { messages: exchanges(5) } },
      { seq: 2, metadata: { messages: [summaryMessage('first')], compact: { head: 2, from: 8 } } },
      { seq: 3, metadata: { messages: exchanges(4, 5) } },
    ];
    const s = foldSteps(steps);
    expect(s.messages.slice(0, 3)).toEqual([...head, summaryMessage('first')]);
    expect(s.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual([
      'run 3',
      'run 4',
      'run 5',
      'run 6',
      'run 7',
      'run 8',
    ]);
    // The next cut summarises the old summary with what followed it.
    const cut = compactionCut(s.messages, 2, 2)!;
    const req = summaryRequest(s.messages.slice(0, 2), s.messages.slice(2, cut));
    expect(req.at(-1)?.content).toContain('Earlier summary:\nfirst');
    expect(req.at(-1)?.content).toContain('count({"i":3})');
    expect(req.at(-1)?.content).not.toContain(SUMMARY_HEADER);
    const again = foldSteps([
      ...steps,
      { seq: 4, metadata: { messages: [summaryMessage('second')], compact: { head: 2, from: cut } } },
    ]);
    expect(again.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual([
      'goal',
      `${SUMMARY_HEADER}\nsecond`,
    ]);
    expect(again.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['run 7', 'run 8']);
    expect(again.nextSeq).toBe(5);
  });
});
