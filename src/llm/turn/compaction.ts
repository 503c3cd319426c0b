import type { ChatMessage } from '../model/model.ts';
import { transcriptSummary } from './state.ts';

/**
 * Context compaction (docs/runtime-model.md § Tools): a long turn keeps its opening messages and its last `keep` exchanges
 * (an assistant message with its tool results) word for word, and the exchanges between become one
 * summary a model call wrote. The summary is stored as a step of its own, and folding the steps puts it
 * in the same place, so a resumed turn sends the model exactly what the turn before its death would have.
 */

/** Exchanges beyond `keep` tolerated before compacting, so a turn does not compact at every step. */
export const COMPACTION_SLACK = 2;

/**
 * Where to cut `messages`: those from `head` up to the returned index are summarised, those from it on
 * kept. Undefined while fewer than `keep + COMPACTION_SLACK` exchanges follow the head, or when off.
 * The cut is always at an assistant message, so no tool result is parted from its call.
 */
export function compactionCut(messages: ChatMessage[], head: number, keep: number): number | undefined {
  if (keep <= 0) return undefined;
  const starts: number[] = [];
  for (let i = head; i < messages.length; i++) if (messages[i]?.role === 'assistant') starts.push(i);
  if (starts.length <= keep + COMPACTION_SLACK) return undefined;
  return starts[starts.length - keep];
}

/** The request for the summary of `older` (a previous summary among them is folded into the new one). */
export function summaryRequest(goal: ChatMessage[], older: ChatMessage[]): ChatMessage[] {
  const earlier = older
    .filter((m) => m.role === 'user' && m.content.startsWith(SUMMARY_HEADER))
    .map((m) => m.content.slice(SUMMARY_HEADER.length).trim());
  return [
    ...goal,
    {
      role: 'user',
      content: [
        'Summarise the work done so far in this turn for your own later use, in at most 15 short lines:',
        'what was tried, what worked, what failed and why, which files were written, and what is left.',
        'Facts only; no advice. Reply with the summary alone.',
        earlier.length ? `\nEarlier summary:\n${earlier.join('\n')}` : '',
        `\nSteps since:\n${transcriptSummary(
          older.filter((m) => m.role !== 'user'),
          6000,
        )}`,
      ].join('\n'),
    },
  ];
}

export const SUMMARY_HEADER = '[summary of the earlier work in this turn]';

/** The message that stands for the summarised exchanges. */
export const summaryMessage = (summary: string): ChatMessage => ({
  role: 'user',
  content: `${SUMMARY_HEADER}\n${summary.trim() || '(no summary)'}`,
});

/** The messages after a compaction step: the head, the summary, and what was kept. */
export function compacted(
  messages: ChatMessage[],
  cut: { head: number; from: number },
  summary: ChatMessage[],
): ChatMessage[] {
  return [...messages.slice(0, cut.head), ...summary, ...messages.slice(cut.from)];
}
