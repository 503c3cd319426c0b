import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { text } from '../../test/harness/llm.ts';
import { outputId } from '../blackboard/grants.ts';
import { llmKit } from './llm.testkit.ts';

const node = process.execPath;
const { stores, setup, grantAndRun, runUntilKilled, setups } = llmKit('llm-wf');

describe('a workflow agent', () => {
  const workflow = (file: string) => [
    {
      name: 'classify',
      llm: { prompt: 'Classify this issue: {{target}}', output: { label: { type: 'string' } } },
    },
    { name: 'route', branch: { field: 'classify.label', cases: { bug: 'fix' }, default: 'end' } },
    {
      name: 'fix',
      code: {
        argv: [
          node,
          '-e',
          `const f=require('fs');f.appendFileSync(${JSON.stringify(file)},'x');console.log(JSON.stringify({patched:f.readFileSync(${JSON.stringify(file)},'utf8').length,kind:process.argv[1]}))`,
          '{{classify.label}}',
        ],
        output: { patched: { type: 'integer' } },
      },
    },
    { name: 'report', llm: { prompt: 'Report: {{fix.patched}} patch(es) for a {{fix.kind}}.' } },
  ];

  it('runs its steps with checked outputs; killed between steps, it resumes at the step where it stopped', async () => {
    const file = `${stores.ws}/workflow-${setups()}`;
    const s = await setup([text('It is a bug, I think.'), text('{"label":"bug"}'), { hang: true }], {
      HOLT_LLM_WORKFLOW: JSON.stringify(workflow(file)),
    });
    // classify (twice: the first answer had no JSON), then report hangs, and the pup "dies".
    const { claim, grant } = await runUntilKilled(s, 3);
    expect(stores.llm.requests[0]!.body.response_format).toEqual({ type: 'json_object' });
    expect(stores.llm.requests[1]!.body.messages.at(-1)?.content).toMatch(/cannot be used: .*not JSON/);
    expect(stores.llm.requests[2]!.body.messages.at(-1)?.content).toBe('Report: 1 patch(es) for a bug.');
    // Resumed: classify and fix are not run again; report is.
    stores.llm.push(text('Fixed the login crash with one patch.'));
    expect(await s.rt.executor!.execute(grant)).toBe('success');
    expect(stores.llm.requests).toHaveLength(4);
    expect(stores.llm.requests[3]!.body.messages).toEqual(stores.llm.requests[2]!.body.messages);
    expect(readFileSync(file, 'utf8')).toBe('x');
    const out = await s.bb.getArtefact(outputId(s.instance, claim.id, 'coder', 'exclusive'));
    expect(out).toMatchObject({ type: 'LlmResult', payload: 'Fixed the login crash with one patch.' });
    const kinds = await stores.pool.query(
      `SELECT s.kind, s.metadata->>'step' AS step FROM holt.agent_steps s JOIN holt.agent_turns t USING (turn_id)
       WHERE t.instance = $1 ORDER BY s.seq`,
      [s.instance],
    );
    expect(kinds.rows).toEqual([
      { kind: 'workflow', step: 'classify' },
      { kind: 'workflow', step: 'route' },
      { kind: 'workflow', step: 'fix' },
      { kind: 'workflow', step: 'report' },
    ]);
  });

  it('a branch can end it (the last output is the result); a failing code step fails the turn as a tool error', async () => {
    const s1 = await setup([text('{"label":"question"}')], {
      HOLT_LLM_WORKFLOW: JSON.stringify(workflow(`${stores.ws}/wf-q-${setups()}`)),
    });
    const r1 = await grantAndRun(s1);
    expect(r1.out?.payload).toBe('{"label":"question"}');
    const broken = workflow('/nonexistent/dir/file');
    const s2 = await setup([text('{"label":"bug"}')], { HOLT_LLM_WORKFLOW: JSON.stringify(broken) });
    const r2 = await grantAndRun(s2);
    expect(r2.outcome).toBe('failure');
    expect(JSON.parse(r2.out!.payload)).toMatchObject({
      error_class: 'tool',
      reason: expect.stringMatching(/^step fix: exit code 1: .*ENOENT/s),
    });
  });
});
