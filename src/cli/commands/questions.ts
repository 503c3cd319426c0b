import { setTimeout as sleep } from 'node:timers/promises';
import { Blackboard } from '../../blackboard/client.ts';
import { answerQuestion, openQuestions } from '../board.ts';
import { age, CliError, EXIT, out, progress, table } from '../output.ts';
import { resolveTarget } from '../resolve.ts';

export async function questions(opts: { name?: string; wait?: boolean; output: string }): Promise<void> {
  const s = resolveTarget(opts.name);
  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  try {
    let qs = await openQuestions(bb);
    if (!qs.length && opts.wait) {
      const p = progress('Waiting for a question');
      while (!qs.length) {
        await sleep(500);
        qs = await openQuestions(bb);
      }
      p.done();
    }
    if (opts.output === 'jsonl') {
      for (const q of qs) out(JSON.stringify(q));
      return;
    }
    if (!qs.length) return out('No open questions.');
    for (const l of table([
      ['ID', 'FROM', 'AGE', 'QUESTION'],
      ...qs.map((q) => [
        q.id.slice(0, 8),
        q.produced_by_role,
        age(q.created_at_ms),
        q.payload.split('\n')[0] ?? '',
      ]),
    ]))
      out(l);
    out(`\nAnswer with: holt answer <id> "your answer"`);
  } finally {
    await bb.close();
  }
}

export async function answer(questionId: string, text: string, opts: { name?: string }): Promise<void> {
  if (!text.trim()) throw new CliError('the answer must not be empty', EXIT.usage);
  const s = resolveTarget(opts.name);
  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  try {
    const a = await answerQuestion(bb, questionId, text);
    out(`Answer artefact created: ${a.answerId} (answers ${a.questionId})`);
  } finally {
    await bb.close();
  }
}
