import { describe, expect, it } from 'vitest';
import { call, submit, text } from '../../../test/harness/llm.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { agentStatusKey } from '../../blackboard/agent-status.ts';
import { artefact } from '../../pup/testkit.ts';
import { constant, llmKit } from '../llm.testkit.ts';

const { stores, setup, grantAndRun } = llmKit('llm-budget');

describe('budgets and model failures', () => {
  it('the call over the window budget is not made: Failure, the agent pauses, the next claim fails without a call', async () => {
    const s = await setup([call('read'), text('x')], {
      HOLT_LLM_TOOLS: JSON.stringify([constant]),
      HOLT_BUDGET_CALLS: '1',
      HOLT_LLM_MUST_END_WITH: 'submit_result',
    });
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('failure');
    expect(JSON.parse(r.out!.payload).reason).toMatch(/agent paused: call budget exhausted: 1\/1/);
    expect(stores.llm.requests).toHaveLength(1);
    const st = await s.bb.redis.hgetall(agentStatusKey(s.instance, 'coder'));
    expect(st).toMatchObject({ state: 'paused', calls_in_window: '1', calls_limit: '1' });
    expect(st.paused_reason).toMatch(/call budget/);
    const r2 = await grantAndRun(s);
    expect(JSON.parse(r2.out!.payload).reason).toMatch(/agent paused/);
    expect(stores.llm.requests).toHaveLength(1);
    expect((await s.rt.decideBid(artefact())).bid).toBe('ignore');
  });

  it('cost budget, no debt: a call whose estimate would exceed it is never made', async () => {
    const s = await setup([submit('x')], {
      HOLT_LLM_PRICE_INPUT_PER_MTOK: '1000',
      HOLT_BUDGET_COST_USD: '0.01',
    });
    const r = await grantAndRun(s);
    expect(JSON.parse(r.out!.payload).reason).toMatch(/cost budget exhausted/);
    expect(stores.llm.requests).toHaveLength(0);
  });

  it('429, 500 and malformed JSON are retried; a model that keeps failing gives a Failure and pauses after N errors', async () => {
    const s = await setup(
      [
        { status: 429 },
        { malformed: true },
        { status: 500 },
        submit('after retries'),
        { status: 500 },
        { status: 500 },
        { status: 503 },
        { status: 500 },
      ],
      { HOLT_LLM_MAX_RETRIES: '3', HOLT_BUDGET_MAX_CONSECUTIVE_ERRORS: '2' },
    );
    const ok = await grantAndRun(s);
    expect(ok.out?.payload).toBe('after retries');
    const bad = await grantAndRun(s);
    expect(bad.outcome).toBe('failure');
    expect(JSON.parse(bad.out!.payload).reason).toMatch(/model call failed after 4 attempt\(s\): HTTP 5/);
    const bad2 = await grantAndRun(s);
    expect(JSON.parse(bad2.out!.payload).reason).toMatch(/model call failed|agent paused/);
    const state = () => s.bb.redis.hget(agentStatusKey(s.instance, 'coder'), 'state');
    await eventually('the agent status to say paused', async () => (await state()) === 'paused');
    expect(await state()).toBe('paused');
  });

  it('LLM bidding: a schema-parsed word, and any failure bids ignore', async () => {
    const s = await setup(
      [text('{"bid":"exclusive","reason":"mine"}'), text('I would love to'), { status: 400 }],
      { HOLT_LLM_BID: 'true' },
    );
    expect(await s.rt.decideBid(artefact())).toMatchObject({ bid: 'exclusive', source: 'llm' });
    expect(await s.rt.decideBid(artefact())).toMatchObject({
      bid: 'ignore',
      fallbackReason: expect.stringMatching(/not one of/),
    });
    expect(await s.rt.decideBid(artefact())).toMatchObject({
      bid: 'ignore',
      fallbackReason: expect.stringMatching(/HTTP 400/),
    });
    expect(stores.llm.requests[0]!.body.stream).toBeFalsy();
  });
});
