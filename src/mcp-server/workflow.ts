import { settles } from '../blackboard/approval.ts';
import type { Artefact } from '../blackboard/types.ts';

/** Where a workflow stands, from its artefacts (pure). */
export type WorkflowState =
  | { state: 'completed'; terminal: Artefact }
  | { state: 'failed'; failure: Artefact }
  | { state: 'question'; questions: Artefact[] }
  | { state: 'running' };

/**
 * A Terminal artefact completes a workflow, an orchestrator's Failure ends it (as `holt watch
 * --exit-on-completion` decides); an agent's Failure may be retried, so the workflow still runs. A Question
 * no Answer settles waits for a person: a client following the workflow is told so rather than left
 * waiting. An approval request is settled only by a person's Answer (`settles`), as the turn decides.
 */
export function workflowState(artefacts: readonly Artefact[]): WorkflowState {
  const terminal = artefacts.find((a) => a.structural_type === 'Terminal');
  if (terminal) return { state: 'completed', terminal };
  const failure = artefacts.find(
    (a) => a.structural_type === 'Failure' && a.produced_by_role === 'orchestrator',
  );
  if (failure) return { state: 'failed', failure };
  const answers = artefacts.filter((a) => a.structural_type === 'Answer');
  const questions = artefacts.filter(
    (q) => q.structural_type === 'Question' && !answers.some((a) => settles(q, a)),
  );
  if (questions.length) return { state: 'question', questions };
  return { state: 'running' };
}

/** An artefact in a listing: what it is, and the start of its payload. */
export function summary(a: Artefact, previewChars = 200): Record<string, unknown> {
  const preview = a.payload.length > previewChars ? `${a.payload.slice(0, previewChars)}…` : a.payload;
  return {
    id: a.id,
    type: a.type,
    structural_type: a.structural_type,
    version: a.version,
    produced_by_role: a.produced_by_role,
    created_at_ms: a.created_at_ms,
    source_artefacts: a.source_artefacts,
    payload_preview: preview,
  };
}
