import { describe, expect, it } from 'vitest';
import { call, submit, text } from '../../../test/harness/llm.ts';
import { artefact } from '../../pup/testkit.ts';
import { llmKit } from '../llm.testkit.ts';

const { stores, setup, grantAndRun } = llmKit('llm-plan');

describe('the plan of a goal', () => {
  it('outlives its turn: a later turn on the same goal carries it on where the first left it, without planning again', async () => {
    const s = await setup(
      [
        text('{"tasks":[{"description":"T","subtasks":["first","second"]}]}'),
        call('mark_subtask_complete', { success: true }),
        submit('one'),
        call('mark_subtask_complete', { success: true }),
        submit('two'),
      ],
      { HOLT_LLM_PLANNING: 'true', HOLT_LLM_MAX_STEPS: '10' },
    );
    const goal = artefact({ type: 'GoalDefined', payload: 'ship it' });
    await s.bb.createArtefact(goal);
    const step = (type: string) =>
      artefact({
        type,
        payload: `do ${type}`,
        source_artefacts: [goal.id],
        created_at_ms: goal.created_at_ms + 10,
      });
    const r1 = await grantAndRun(s, step('Step1'));
    expect(r1.out?.payload).toBe('one');
    expect(stores.llm.requests).toHaveLength(3); // decomposition, mark, submit
    const r2 = await grantAndRun(s, step('Step2'));
    expect(r2.out?.payload).toBe('two');
    expect(stores.llm.requests).toHaveLength(5); // no second decomposition
    const note = stores.llm.requests[3]!.body.messages.find((m) =>
      m.content?.startsWith('Your plan for this goal'),
    );
    expect(note?.content).toMatch(/carried on from earlier turns/);
    expect(note?.content).toMatch(/✓ \[1\.1\] first\n.*→ \[1\.2\] second/s);
    const row = await stores.pool.query('SELECT goal_id, plan FROM holt.llm_plans WHERE instance = $1', [
      s.instance,
    ]);
    expect(row.rows).toHaveLength(1);
    expect(row.rows[0].goal_id).toBe(goal.id);
    expect(row.rows[0].plan.tasks[0].children.map((c: { status: string }) => c.status)).toEqual([
      'done',
      'done',
    ]);
  });
});
