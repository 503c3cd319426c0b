import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { call, submit, text } from '../../test/harness/llm.ts';
import { artefact } from '../pup/testkit.ts';
import { llmKit } from './llm.testkit.ts';
import { auditOf, pivotMessage, reviewDue } from './self-audit.ts';
import { DEFAULT_REVIEW_PROMPT } from './turn/audit.ts';

const { stores, setup, grantAndRun } = llmKit('llm-audit');

const done = { status: 'done' as const, looped: false };
const failed = { status: 'failed' as const, looped: false };

describe('the self-audit (pure)', () => {
  it('success rate over the window, failures in a row, loops, progress; stuck and looping flags', () => {
    expect(auditOf([], 0)).toMatchObject({ success_rate: null, turns: 0, stuck: false, looping: false });
    const a = auditOf([failed, failed, failed, done, done], 5);
    expect(a).toMatchObject({ success_rate: 0.4, failures_in_row: 3, turns_since_progress: 3, stuck: true });
    const l = auditOf([{ ...done, looped: true }, { ...done, looped: true }, done], 3);
    expect(l).toMatchObject({
      success_rate: 1,
      loops: 2,
      looping: true,
      stuck: false,
      turns_since_progress: 2,
    });
    expect(
      auditOf(
        Array.from({ length: 30 }, () => done),
        30,
      ).turns,
    ).toBe(20);
  });

  it('a review is due every N turns, or when stuck or looping; a pivot only when stuck or looping', () => {
    const fine = auditOf([done, failed], 10);
    expect([reviewDue(fine, 5), reviewDue(fine, 3), reviewDue(fine, 0)]).toEqual([true, false, false]);
    expect(pivotMessage(fine)).toBeUndefined();
    const stuck = auditOf([failed, failed, failed], 3);
    expect(reviewDue(stuck, 100)).toBe(true);
    expect(pivotMessage(stuck)).toMatch(/your last 3 turns failed .*Change your approach/);
  });
});

/** Turns the agent `coder` of `instance` finished before, as its stored history. */
async function history(instance: string, statuses: ('done' | 'failed')[]) {
  const actor = randomUUID();
  await stores.pool.query(
    `INSERT INTO holt.agent_state_head (instance, actor_id, role, worker_target, claim_id)
     VALUES ($1, $2, 'coder', 'coder', 'old')`,
    [instance, actor],
  );
  for (const [i, status] of statuses.entries())
    await stores.pool.query(
      `INSERT INTO holt.agent_turns (turn_id, instance, actor_id, claim_id, role, phase, claim_type, status, ended_at)
       VALUES ($1, $2, $3, $4, 'coder', 'exclusive', 'exclusive', $5, now() - make_interval(mins => $6))`,
      [randomUUID(), instance, actor, `old-${i}`, status, statuses.length - i],
    );
}

describe('the self-audit in turns and workflows (real stores, scripted model)', () => {
  it('a stuck agent steps back in a strategic review, and its turn opens with the pivot and the review', async () => {
    const s = await setup(
      [text('I kept retrying the same flaky command; next I will read the logs first.'), text('done')],
      {
        HOLT_LLM_REVIEW_EVERY: '10',
        HOLT_LLM_MAX_STEPS: '2',
      },
    );
    await history(s.instance, ['done', 'failed', 'failed', 'failed']);
    const { outcome } = await grantAndRun(s);
    expect(outcome).toBe('success');
    const [review, turn] = stores.llm.requests;
    expect(review!.body.messages[0]).toEqual({ role: 'system', content: DEFAULT_REVIEW_PROMPT });
    expect(String(review!.body.messages[1]?.content)).toContain('"failures_in_row":3');
    const opening = turn!.body.messages.filter((m) => m.role === 'user').map((m) => String(m.content));
    expect(opening.join('\n')).toMatch(/Self-audit \(the runtime's\): your last 3 turns failed/);
    expect(opening.join('\n')).toContain('next I will read the logs first');
  });

  it('a workflow reads {{self.*}} and a self_audit step, and branches on being stuck', async () => {
    const workflow = [
      { name: 'audit', self_audit: {} },
      { name: 'route', branch: { field: 'audit.stuck', cases: { true: 'rethink' }, default: 'work' } },
      { name: 'work', llm: { prompt: 'Work on it.' } },
      {
        name: 'rethink',
        llm: { prompt: 'Rethink: success rate {{self.success_rate}}, {{audit.failures_in_row}} failures.' },
      },
    ];
    const s = await setup([text('a new approach')], { HOLT_LLM_WORKFLOW: JSON.stringify(workflow) });
    await history(s.instance, ['done', 'failed', 'failed', 'failed']);
    const { out } = await grantAndRun(s);
    expect(out?.payload).toBe('a new approach');
    expect(stores.llm.requests).toHaveLength(1);
    expect(stores.llm.requests[0]!.body.messages.at(-1)?.content).toBe(
      'Rethink: success rate 0.25, 3 failures.',
    );
  });

  it('a strategic review makes a planning agent plan its goal afresh instead of carrying the old plan on', async () => {
    const s = await setup(
      [
        text('{"tasks":[{"description":"T","subtasks":["first","second"]}]}'),
        call('mark_subtask_complete', { success: true }),
        submit('one'),
        text('The plan splits the work badly: do it in one go.'),
        text('{"tasks":[{"description":"T","subtasks":["all of it"]}]}'),
        submit('two'),
      ],
      { HOLT_LLM_PLANNING: 'true', HOLT_LLM_MAX_STEPS: '10', HOLT_LLM_REVIEW_EVERY: '1' },
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
    expect((await grantAndRun(s, step('Step1'))).out?.payload).toBe('one');
    expect((await grantAndRun(s, step('Step2'))).out?.payload).toBe('two');
    // The second turn: the review (its first turn done, every 1 turn), then a new decomposition.
    const second = stores.llm.requests.slice(3);
    expect(second[0]!.body.messages[0]?.content).toBe(DEFAULT_REVIEW_PROMPT);
    expect(second[1]!.body.response_format).toEqual({ type: 'json_object' });
    expect(JSON.stringify(second[1]!.body.messages)).toContain('The plan splits the work badly');
    const plan = await stores.pool.query('SELECT plan FROM holt.llm_plans WHERE instance = $1', [s.instance]);
    expect(JSON.stringify(plan.rows[0]?.plan)).toContain('all of it');
  });
});
