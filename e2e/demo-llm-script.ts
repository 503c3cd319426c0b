import { call, type ScriptedReply } from '../test/harness/llm.ts';

/** examples/demo-llm's three agents' model replies, in the order they run (Writer, Reviewer, Finisher). */
export const DEMO_LLM_PLAN =
  '# Plan\n\n1. List the changes.\n2. Write CHANGELOG.md.\n\n## Summary\nA changelog.';
export const DEMO_LLM_SCRIPT: ScriptedReply[] = [
  call('list_files', {}),
  call('submit_result', { artefact_type: 'Draft', artefact_payload: DEMO_LLM_PLAN, summary: 'the plan' }),
  call('submit_result', {
    artefact_type: 'Review',
    artefact_payload: '{}',
    summary: 'approved',
    structural_type: 'Review',
  }),
  call('submit_result', {
    artefact_type: 'WorkflowComplete',
    artefact_payload: 'Planned a CHANGELOG',
    summary: 'done',
    structural_type: 'Terminal',
  }),
];
