import { describe, expect, it } from 'vitest';
import type { Artefact } from '../blackboard/types.ts';
import { summary, workflowState } from './workflow.ts';

const art = (
  id: string,
  structural_type: Artefact['structural_type'],
  by = 'Agent',
  sources: string[] = [],
): Artefact => ({
  id,
  logical_id: id,
  version: 1,
  structural_type,
  type: structural_type === 'Standard' ? 'GoalDefined' : structural_type,
  payload: `payload of ${id}`,
  source_artefacts: sources,
  produced_by_role: by,
  created_at_ms: 1,
});

describe('workflowState: where a workflow stands', () => {
  const goal = art('g', 'Standard', 'user');
  it('runs until something ends it', () => {
    expect(workflowState([goal])).toEqual({ state: 'running' });
  });
  it('a Terminal completes it', () => {
    const t = art('t', 'Terminal', 'Finisher', ['g']);
    expect(workflowState([goal, t])).toEqual({ state: 'completed', terminal: t });
  });
  it("the orchestrator's Failure ends it; an agent's Failure (retried) does not", () => {
    expect(workflowState([goal, art('f', 'Failure', 'Drafter', ['g'])])).toEqual({ state: 'running' });
    const f = art('o', 'Failure', 'orchestrator', ['g']);
    expect(workflowState([goal, f])).toEqual({ state: 'failed', failure: f });
  });
  it('an open Question waits for a person; once answered the workflow runs again', () => {
    const q = art('q', 'Question', 'Asker', ['g']);
    expect(workflowState([goal, q])).toEqual({ state: 'question', questions: [q] });
    expect(workflowState([goal, q, art('a', 'Answer', 'user', ['q'])])).toEqual({ state: 'running' });
  });
  it("an approval request waits for a person's Answer: an agent's Answer citing it does not settle it", () => {
    const q = { ...art('q', 'Question', 'Reporter', ['g']), type: 'ApprovalRequest' };
    const byAgent = art('a1', 'Answer', 'Helper', ['q']);
    expect(workflowState([goal, q, byAgent])).toEqual({ state: 'question', questions: [q] });
    expect(workflowState([goal, q, byAgent, art('a2', 'Answer', 'user', ['q'])])).toEqual({
      state: 'running',
    });
  });
});

describe('summary: an artefact in a listing', () => {
  it('keeps the start of a long payload only', () => {
    const a = { ...art('x', 'Standard'), payload: 'y'.repeat(500) };
    expect(summary(a).payload_preview).toBe(`${'y'.repeat(200)}…`);
    expect(summary(art('z', 'Standard')).payload_preview).toBe('payload of z');
  });
});
