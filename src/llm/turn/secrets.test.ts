import { describe, expect, it } from 'vitest';
import { call, submit, text } from '../../../test/harness/llm.ts';
import { artefact } from '../../pup/testkit.ts';
import { llmKit } from '../llm.testkit.ts';

const node = process.execPath;
const { stores, setup, grantAndRun } = llmKit('llm-sec');

describe('nothing the pup holds goes to the model', () => {
  it("a payload quoting the store password and the model's key reaches the model redacted, and so do tool results", async () => {
    const dbPassword = decodeURIComponent(new URL(stores.postgres.url).password);
    expect(dbPassword.length).toBeGreaterThanOrEqual(8);
    const quote = {
      name: 'quote',
      description: 'prints what it is given',
      parameters: { type: 'object', properties: {} },
      argv: [node, '-e', 'console.log(process.env.QUOTED)'],
      env: { QUOTED: `tool saw ${dbPassword}` },
    };
    const s = await setup([text('{"bid":"exclusive"}'), call('quote'), submit('done')], {
      HOLT_LLM_TOOLS: JSON.stringify([quote]),
      HOLT_LLM_BID: 'true',
    });
    const goal = artefact({ payload: `upstream leaked ${dbPassword} and sk-unit-test-key-000` });
    // The bid reads the payload straight from the blackboard; the turn from its stored steps.
    expect((await s.rt.decideBid(goal)).bid).toBe('exclusive');
    const r = await grantAndRun(s, goal);
    expect(r.outcome).toBe('success');
    const sent = JSON.stringify(stores.llm.requests.map((q) => q.body.messages));
    expect(sent).toContain('upstream leaked [redacted] and [redacted]');
    expect(sent).toContain('tool saw [redacted]');
    expect(sent).not.toContain(dbPassword);
    expect(sent).not.toContain('sk-unit-test-key-000');
  });
});
