import { expect } from 'vitest';
import type { Artefact } from '../src/blackboard/types.ts';

/** The demo's protocol: a rejected draft, its rework approved, lint and commit in either order. */
export function expectDemoTrail(trail: Artefact[], git: (...args: string[]) => string): void {
  expect(trail.map((a) => `${a.type}@${a.version}`)).toEqual([
    'GoalDefined@1',
    'Draft@1',
    'Review@1',
    'Draft@2',
    'Review@1',
    ...(trail[5]?.type === 'LintReport'
      ? ['LintReport@1', 'CodeCommit@1']
      : ['CodeCommit@1', 'LintReport@1']),
    'WorkflowComplete@1',
  ]);
  expect(trail.at(-1)?.structural_type).toBe('Terminal');
  const reviews = trail.filter((a) => a.type === 'Review').map((a) => a.payload);
  expect(reviews[0]).toContain('Summary');
  expect(reviews[1]).toBe('{}');
  // The commit is in the workspace (a PVC's directory on Kubernetes), made by the Publisher.
  const commit = trail.find((a) => a.type === 'CodeCommit')?.payload ?? '';
  expect(git('log', '--format=%H %s', '-1')).toBe(`${commit} Publish plan v2`);
  expect(git('show', 'HEAD:docs/plan.md')).toContain('## Summary');
}
