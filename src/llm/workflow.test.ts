import { describe, expect, it } from 'vitest';
import { WorkflowStep } from '../api/agent.ts';
import { artefact } from '../pup/testkit.ts';
import { jsonIn, nextIndex, render, stepOutput } from './workflow.ts';

const target = artefact({ type: 'Issue', payload: 'the login page crashes' });
const steps = [
  { name: 'classify', llm: { prompt: 'Classify: {{target}}', output: { label: { type: 'string' } } } },
  {
    name: 'route',
    branch: { field: 'classify.label', cases: { bug: 'fix', question: 'end' }, default: 'report' },
  },
  { name: 'fix', code: { argv: ['./fix.sh', '{{classify.label}}'] } },
  { name: 'report', llm: { prompt: 'Report on {{fix}}' } },
].map((s) => WorkflowStep.parse(s));

describe('workflow steps: templates, outputs, where to go next', () => {
  it('renders the target and earlier outputs; an unknown reference is an error, never an empty string', () => {
    const outputs = { classify: { label: 'bug' }, fix: 'patched 2 files' };
    expect(render('{{target.type}}: {{target}} → {{classify.label}}; {{fix}}', target, outputs)).toEqual({
      ok: true,
      value: 'Issue: the login page crashes → bug; patched 2 files',
    });
    expect(render('{{classify}}', target, outputs)).toEqual({ ok: true, value: '{"label":"bug"}' });
    expect(render('{{later}}', target, outputs)).toEqual({
      ok: false,
      error: '{{later}} names no earlier step',
    });
    expect(render('{{classify.score}}', target, outputs)).toEqual({
      ok: false,
      error: 'step classify has no field score',
    });
  });

  it('an output with declared fields is parsed and checked; without, it is the text', () => {
    const fields = { label: { type: 'string' as const, required: true, description: '' } };
    expect(stepOutput('{"label":"bug","extra":1}', fields)).toEqual({
      ok: true,
      value: { label: 'bug', extra: 1 },
    });
    expect(stepOutput('{"label":3}', fields)).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^label: /),
    });
    expect(stepOutput('plain', undefined)).toEqual({ ok: true, value: 'plain' });
    expect(jsonIn('Sure! ```json\n{"label":"bug"}\n```')).toBe('{"label":"bug"}');
  });

  it('goes on in order; a branch follows its case, its default, or ends; no case and no default is an error', () => {
    expect(nextIndex(steps, 0, {}, target)).toEqual({ ok: true, index: 1 });
    expect(nextIndex(steps, 1, { classify: { label: 'bug' } }, target)).toEqual({ ok: true, index: 2 });
    expect(nextIndex(steps, 1, { classify: { label: 'question' } }, target)).toEqual({ ok: true, index: -1 });
    expect(nextIndex(steps, 1, { classify: { label: 'praise' } }, target)).toEqual({ ok: true, index: 3 });
    expect(nextIndex(steps, 3, {}, target)).toEqual({ ok: true, index: -1 });
    const strict = [
      WorkflowStep.parse({ name: 'b', branch: { field: 'target.type', cases: { Bug: 'end' } } }),
    ];
    expect(nextIndex(strict, 0, {}, target)).toEqual({
      ok: false,
      error: 'branch b: no case for "Issue" and no default',
    });
  });

  it('a step is exactly one of llm, code or branch', () => {
    expect(WorkflowStep.safeParse({ name: 'x' }).success).toBe(false);
    expect(WorkflowStep.safeParse({ name: 'x', llm: { prompt: 'p' }, code: { argv: ['a'] } }).success).toBe(
      false,
    );
    expect(WorkflowStep.safeParse({ name: 'x', code: { argv: ['a'], tool: 't' } }).success).toBe(false);
  });
});
