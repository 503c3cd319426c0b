import { describe, expect, it } from 'vitest';
import { call, submit } from '../../../test/harness/llm.ts';
import { llmKit } from '../llm.testkit.ts';

const { stores, setup, grantAndRun, lastTool } = llmKit('llm-work');

describe('work items', () => {
  it('the model creates, updates and completes its items; a completion without a report is sent back once', async () => {
    const s = await setup(
      [
        call('work_create', { objective: 'fix the login crash' }),
        call('work_update', { id: '00000000-0000-4000-8000-000000000000', plan_status: 'ready' }), // no such item
        call('work_update', {
          plan_status: 'ready',
          todos: [{ text: 'reproduce', done: true }, { text: 'patch' }],
        }),
        call('work_complete'), // no report, no text: asked for it, the item stays open
        {
          text: 'Patched the null session check; the crash is gone.',
          toolCalls: [{ name: 'work_complete', arguments: {} }],
        },
        call('work_list', { all: true }),
        submit('done'),
      ],
      { HOLT_LLM_WORK_ITEMS: 'true', HOLT_LLM_MAX_STEPS: '12' },
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    const created = /^created ([0-9a-f-]{36}) · open · plan draft · runnable: fix the login crash$/.exec(
      lastTool(1),
    );
    expect(created).not.toBeNull();
    const itemId = created![1]!;
    expect(lastTool(2)).toMatch(/^error: no open work item 00000000/);
    expect(lastTool(3)).toMatch(
      /plan ready · runnable: fix the login crash\n {2}\[x\] reproduce\n {2}\[ \] patch$/,
    );
    expect(lastTool(4)).toMatch(/^error: the work item stays open: a completion needs its report/);
    expect(lastTool(5)).toMatch(
      /^completed .* · completed · .*\n.*report: Patched the null session check; the crash is gone\.$/s,
    );
    expect(lastTool(6)).toContain(`${itemId} · completed`);
    const row = await stores.pool.query('SELECT state, report FROM holt.work_items WHERE id = $1', [itemId]);
    expect(row.rows).toEqual([
      { state: 'completed', report: 'Patched the null session check; the crash is gone.' },
    ]);
    expect(stores.llm.requests[0]!.body.tools!.map((t) => t.function.name)).toContain('work_complete');
  });

  it('are offered only to an agent that asks for them', async () => {
    const s = await setup([submit('done')]);
    await grantAndRun(s);
    expect(stores.llm.requests[0]!.body.tools!.map((t) => t.function.name)).not.toContain('work_create');
  });
});
