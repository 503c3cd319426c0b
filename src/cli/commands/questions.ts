import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Blackboard } from '../../blackboard/client.ts';
import type { Artefact } from '../../blackboard/types.ts';
import { age, CliError, EXIT, out, progress, table } from '../output.ts';
import { resolveTarget } from '../resolve.ts';
import { resolveShortId } from './hoard.ts';

/** Questions that no Answer artefact cites yet, oldest first. */
export async function openQuestions(bb: Blackboard): Promise<Artefact[]> {
  const all = (await bb.getArtefacts(await bb.listArtefactIds())).filter((a): a is Artefact => a !== null);
  const answered = new Set(
    all.filter((a) => a.structural_type === 'Answer').flatMap((a) => a.source_artefacts),
  );
  return all.filter((a) => a.structural_type === 'Question' && !answered.has(a.id));
}

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
    const id = resolveShortId(await bb.listArtefactIds(), questionId);
    const q = await bb.getArtefact(id);
    if (q?.structural_type !== 'Question') throw new CliError(`${id} is not a Question artefact`, EXIT.usage);
    const answerId = randomUUID();
    await bb.createArtefact({
      id: answerId,
      logical_id: answerId,
      version: 1,
      structural_type: 'Answer',
      type: 'Answer',
      payload: text,
      source_artefacts: [q.id],
      produced_by_role: 'user',
    });
    out(`Answer artefact created: ${answerId} (answers ${q.id})`);
  } finally {
    await bb.close();
  }
}
