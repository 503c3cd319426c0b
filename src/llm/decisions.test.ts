import { describe, expect, it } from 'vitest';
import { AgentTool } from '../api/agent.ts';
import { ownQuestionReason, parseBid } from './bid.ts';
import { afterError, checkBudget } from './model/budget.ts';
import { buildToolSet, declaredArgs, renderArgv, visibleParameters } from './tools/tools.ts';
import { checkAction, emptyLoopState, recordAction, recordBlock, signature } from './turn/loop-guard.ts';
import { activeLeaf, decompose, markSubtask, planFrom } from './turn/plan.ts';
import { nextStep, onNoToolCalls, timeBoxExceeded } from './turn/policy.ts';

const budget = {
  windowMs: 60_000,
  calls: 2 as number | undefined,
  tokens: undefined as number | undefined,
  costUsd: undefined as number | undefined,
  maxConsecutiveErrors: 3,
  errorBaseMs: 100,
  errorPauseMs: 5_000,
};
const est = { promptTokens: 10, completionTokens: 10, totalTokens: 20 };

describe('loop guard (docs/runtime-model.md § Tools)', () => {
  it('blocks the third identical call, in any key order', () => {
    let s = emptyLoopState();
    const sig = signature('read', { b: 1, a: 2 });
    expect(signature('read', { a: 2, b: 1 })).toBe(sig);
    s = recordAction(s, sig, 'r1').state;
    s = recordAction(s, sig, 'r2').state;
    expect(checkAction(s, sig)).toMatchObject({ ok: false, rule: 'repeat' });
  });
  it('blocks A-B-A-B within the last 10 actions', () => {
    let s = emptyLoopState();
    for (const [x, h] of [
      ['A', '1'],
      ['B', '2'],
      ['A', '3'],
    ] as const)
      s = recordAction(s, x, h).state;
    expect(checkAction(s, 'B')).toMatchObject({ ok: false, rule: 'alternation' });
    expect(checkAction(s, 'C')).toEqual({ ok: true });
  });
  it('a repeated call with the same result is blocked from then on; blocks stick', () => {
    let s = recordAction(emptyLoopState(), 'R', 'same').state;
    const r = recordAction(s, 'R', 'same');
    expect(r.verdict).toMatchObject({ ok: false, rule: 'same_result' });
    s = r.state;
    expect(checkAction(s, 'R')).toMatchObject({ ok: false, rule: 'blocked' });
    expect(recordBlock(s, 'X').blocked).toContain('X');
  });
});

describe('budgets (docs/runtime-model.md § Budgets and error classes)', () => {
  const now = 1_000_000;
  it('no debt: the call over the window limit is refused, with when it frees', () => {
    const l = {
      window: [
        { atMs: now - 30_000, tokens: 5, costUsd: 0 },
        { atMs: now - 10_000, tokens: 5, costUsd: 0 },
      ],
      totalCostUsd: 0,
    };
    const v = checkBudget(l, budget, est, 0, now);
    expect(v).toMatchObject({ ok: false, limit: 'calls', retryAtMs: now + 30_000 });
    expect(checkBudget({ ...l, window: l.window.slice(1) }, budget, est, 0, now)).toEqual({ ok: true });
  });
  it('tokens and cost count what the call would use', () => {
    const l = { window: [{ atMs: now - 1, tokens: 90, costUsd: 0 }], totalCostUsd: 0.9 };
    expect(checkBudget(l, { ...budget, calls: undefined, tokens: 100 }, est, 0, now)).toMatchObject({
      ok: false,
      limit: 'tokens',
    });
    expect(checkBudget(l, { ...budget, calls: undefined, costUsd: 1 }, est, 0.2, now)).toMatchObject({
      ok: false,
      limit: 'cost',
    });
    expect(checkBudget(l, { ...budget, calls: undefined, costUsd: 1 }, est, 0.05, now)).toEqual({ ok: true });
  });
  it('consecutive errors back off exponentially, then pause', () => {
    let s = afterError({ consecutive: 0 }, budget, 0);
    expect(s.delayMs).toBe(100);
    s = afterError(s, budget, 0);
    expect(s.delayMs).toBe(200);
    s = afterError(s, budget, 0);
    expect(s.pausedUntilMs).toBe(5_000);
  });
});

describe('planning (docs/runtime-model.md § Tools)', () => {
  const p0 = planFrom('goal', {
    tasks: [
      { description: 't1', subtasks: ['a', 'b'] },
      { description: 't2', subtasks: ['c'] },
    ],
  });
  it('advances subtask → task → goal', () => {
    let r = markSubtask(p0, true, '');
    expect(r.effect).toMatchObject({ kind: 'advanced', next: { id: '1.2' } });
    r = markSubtask(r.plan, true, '');
    expect(r.effect).toMatchObject({ kind: 'advanced', next: { id: '2.1' } });
    expect(r.plan.tasks[0]!.status).toBe('done');
    expect(markSubtask(r.plan, true, '').effect).toEqual({ kind: 'complete' });
  });
  it('escalates a subtask failing twice: decompose, then give up at max depth', () => {
    let r = markSubtask(p0, false, 'x');
    expect(r.effect.kind).toBe('retry');
    r = markSubtask(r.plan, false, 'y');
    expect(r.effect.kind).toBe('decompose');
    const p = decompose(r.plan, '1.1', ['a1', 'a2']);
    expect(activeLeaf(p)?.node.id).toBe('1.1.1');
    r = markSubtask(markSubtask(p, false, '1').plan, false, '2');
    expect(r.effect.kind).toBe('give_up');
  });
});

describe('step policy and tools', () => {
  it('warns two steps before the end and allows only submit_result on the last', () => {
    expect(nextStep(0, 4)).toEqual({ kind: 'call', step: 1, final: false });
    expect(nextStep(2, 4)).toMatchObject({
      final: false,
      warning: expect.stringContaining('Two steps'),
    });
    expect(nextStep(3, 4)).toMatchObject({
      final: true,
      warning: expect.stringContaining('only submit_result'),
    });
    expect(nextStep(3, 4, ['publish', 'submit_result'])).toMatchObject({
      final: true,
      warning: expect.stringContaining('only publish or submit_result are available'),
    });
    expect(nextStep(4, 4)).toEqual({ kind: 'exhausted' });
  });
  it('must_end_with: empty ends with the text (placeholder if empty), else nudges', () => {
    expect(onNoToolCalls(undefined, '')).toMatchObject({
      kind: 'end',
      text: expect.stringContaining('without'),
    });
    expect(onNoToolCalls('submit_result', 'hi')).toMatchObject({
      kind: 'nudge',
      message: expect.stringContaining('submit_result'),
    });
  });
  it('time box: a turn or a goal past its wall-clock limit must stop; no limit, no stop', () => {
    const started = { turnMs: 1_000, goalMs: 500 };
    expect(timeBoxExceeded(started, {}, 10_000_000)).toBeUndefined();
    expect(timeBoxExceeded(started, { turnMs: 60_000 }, 61_000)).toBeUndefined();
    expect(timeBoxExceeded(started, { turnMs: 60_000 }, 61_001)).toBe(
      'time box: the turn ran for more than 60 s',
    );
    expect(timeBoxExceeded(started, { goalMs: 30_000 }, 30_501)).toBe(
      'time box: the goal has been worked on for more than 30 s',
    );
  });
  it('declared result fields: a natural end whose text lacks them is sent back, one that carries them ends', () => {
    const fields = { title: { type: 'string' as const, required: true, description: '' } };
    expect(onNoToolCalls(undefined, 'just prose', fields)).toMatchObject({
      kind: 'nudge',
      message: expect.stringMatching(/cannot be the result: .*not JSON.*Call submit_result/),
    });
    expect(onNoToolCalls(undefined, '{"title":"T"}', fields)).toEqual({ kind: 'end', text: '{"title":"T"}' });
  });
  it('fixed arguments are hidden and injected, defaults fill, schema errors are reported', () => {
    const t = AgentTool.parse({
      name: 'grep',
      parameters: {
        type: 'object',
        properties: { pattern: { type: 'string' }, dir: { type: 'string' }, n: { type: 'integer' } },
        required: ['pattern', 'dir'],
      },
      argv: ['grep', '-m', '{{n}}', '{{pattern}}', '{{dir}}'],
      defaults: { n: 5 },
      fixed: { dir: '/data' },
    });
    expect(visibleParameters(t)).toMatchObject({ properties: { pattern: {}, n: {} }, required: ['pattern'] });
    expect(Object.keys((visibleParameters(t).properties as object) ?? {})).not.toContain('dir');
    const ok = declaredArgs(t, { pattern: 'x', dir: '/etc' });
    expect(ok).toEqual({ ok: true, value: { n: 5, pattern: 'x', dir: '/data' } });
    if (ok.ok) expect(renderArgv(t.argv ?? [], ok.value)).toEqual(['grep', '-m', '5', 'x', '/data']);
    expect(declaredArgs(t, { pattern: 3 })).toMatchObject({
      ok: false,
      error: expect.stringContaining('pattern'),
    });
  });
  it('the allowlist filters declared tools and built-ins; submit_result stays', () => {
    const t = AgentTool.parse({ name: 'ls', argv: ['ls'] });
    const s = buildToolSet([t], { allowed: ['ask_question'], planning: true, memory: false });
    expect(s.specs.map((x) => x.function.name).sort()).toEqual(['ask_question', 'submit_result']);
  });
  it('parses bids: bare word, JSON, and anything else is refused', () => {
    expect(parseBid(' Exclusive ')).toMatchObject({ ok: true, bid: 'exclusive' });
    expect(parseBid('```json\n{"bid":"review","reason":"r"}\n```')).toMatchObject({
      ok: true,
      bid: 'review',
    });
    expect(parseBid('{"bid": "maybe"}').ok).toBe(false);
  });
});

describe('bids on questions', () => {
  const q = (role: string) => ({ structural_type: 'Question' as const, produced_by_role: role });
  const answer = { structural_type: 'Answer' as const, produced_by_role: 'human' };
  it("an agent never bids on its own Question, nor on an Answer to it; another role's are open to it", () => {
    expect(ownQuestionReason(q('Reporter'), [], 'Reporter')).toMatch(/our own question is for others/);
    expect(ownQuestionReason(answer, [null, q('Reporter')], 'Reporter')).toMatch(/resumes the asking turn/);
    expect(ownQuestionReason(q('Writer'), [], 'Reporter')).toBeNull();
    expect(ownQuestionReason(answer, [q('Writer')], 'Reporter')).toBeNull();
    expect(
      ownQuestionReason(
        { structural_type: 'Standard' as const, produced_by_role: 'Reporter' },
        [],
        'Reporter',
      ),
    ).toBeNull();
  });
});

describe('the LLM demo', () => {
  it('examples/demo-llm/holt.yml parses and gives its agents the LLM environment', async () => {
    const { loadHoltFile } = await import('../api/holtfile.ts');
    const { pupEnvironment } = await import('../api/pupenv.ts');
    const f = loadHoltFile(new URL('../../examples/demo-llm/holt.yml', import.meta.url).pathname);
    expect(f.warnings).toEqual([]);
    const writer = f.agents.find((a) => a.role === 'Writer')!;
    const env = pupEnvironment(writer, {
      instance: 'x',
      role: 'Writer',
      workspace: '/w',
      healthPort: 0,
      llm: f.holt.llm,
    });
    expect(env).toMatchObject({
      HOLT_LLM_ENABLED: 'true',
      HOLT_LLM_API_KEY_ENV: 'OPENAI_API_KEY',
      HOLT_LLM_MUST_END_WITH: 'submit_result',
    });
    expect(env.HOLT_LLM_BASE_URL).toBeUndefined(); // from the user's environment
    expect(JSON.parse(env.HOLT_LLM_TOOLS!)).toHaveLength(2);
  });
});
