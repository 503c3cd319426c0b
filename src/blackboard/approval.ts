import { randomUUID } from 'node:crypto';
import type { NewArtefact } from './client.ts';
import type { Artefact } from './types.ts';

// Approval of risky calls (src/llm/turn/approval.ts): a Question of this type asks a person to approve
// one tool call, and only a person's Answer settles it. Here so that the turn and `holt questions` agree.

/** The role of a person's artefacts: `holt answer`, `holt mcp` and `holt` goals write it. */
export const PERSON_ROLE = 'user';
/** The type of a Question that asks a person to approve a tool call. */
export const APPROVAL_TYPE = 'ApprovalRequest';

/** Whether `answer` settles `question`: any Answer citing it, but for an approval only a person's. Pure. */
export function settles(
  question: Pick<Artefact, 'id' | 'type'>,
  answer: Pick<Artefact, 'structural_type' | 'source_artefacts' | 'produced_by_role'>,
): boolean {
  return (
    answer.structural_type === 'Answer' &&
    answer.source_artefacts.includes(question.id) &&
    (question.type !== APPROVAL_TYPE || answer.produced_by_role === PERSON_ROLE)
  );
}

/** A person's Answer to a Question (`holt answer`, the console): the asking agent resumes on it. */
export function personAnswer(questionId: string, text: string): NewArtefact {
  const id = randomUUID();
  return {
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Answer',
    type: 'Answer',
    payload: text,
    source_artefacts: [questionId],
    produced_by_role: PERSON_ROLE,
  };
}
