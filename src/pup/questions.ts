import { v5 as uuidv5 } from 'uuid';
import { childrenOf } from '../blackboard/claim-engine.ts';
import type { Blackboard, NewArtefact } from '../blackboard/client.ts';
import type { Artefact } from '../blackboard/types.ts';

/** A command tool may ask this many Questions in one grant; one more is a Failure. */
export const MAX_QUESTIONS_PER_GRANT = 5;

// Fixed namespace (random once; never change it: ids already written depend on it).
const QUESTION_NS = '0b8f5c0e-3f4d-4e7a-9d62-7c1e5a9b2f31';

/**
 * The id of the n-th Question a grant's tool asks: a function of the grant's output id, so a re-run
 * asks under the same id (write-once: never a second copy) and never under the output id (a Question
 * is not the grant's output, which stays open until the tool delivers).
 */
export function questionId(outputId: string, n: number): string {
  return uuidv5(`${outputId}/question/${n}`, QUESTION_NS);
}

/** A Question asked while working on `target`: a new thread sourced from it, like any derivative. */
export function questionArtefact(
  id: string,
  role: string,
  target: Artefact,
  q: { type: string; payload: string },
): NewArtefact {
  return {
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Question',
    type: q.type,
    payload: q.payload,
    source_artefacts: [target.id],
    produced_by_role: role,
  };
}

/** Where a grant stands with its questions. */
export interface QuestionState {
  /** The Answers so far, in the order their Questions were asked (context for the next run). */
  answers: Artefact[];
  /** The Question still without an Answer: the grant waits (the tool is not run). */
  waitingOn?: string;
  /** The index the next Question would get. */
  next: number;
}

/** Reads the grant's Questions in order, each with its latest Answer, up to the first unanswered one. */
export async function questionState(bb: Blackboard, outputId: string): Promise<QuestionState> {
  const answers: Artefact[] = [];
  for (let n = 0; n <= MAX_QUESTIONS_PER_GRANT; n++) {
    const q = questionId(outputId, n);
    const [asked] = await bb.artefactsExist([q]);
    if (!asked) return { answers, next: n };
    const kids = await bb.getArtefacts(await childrenOf(bb, q));
    const answer = kids
      .filter((a): a is Artefact => a?.structural_type === 'Answer')
      .sort((a, b) => b.created_at_ms - a.created_at_ms)[0];
    if (!answer) return { answers, waitingOn: q, next: n };
    answers.push(answer);
  }
  return { answers, next: MAX_QUESTIONS_PER_GRANT + 1 };
}
