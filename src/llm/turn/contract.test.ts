import { describe, expect, it } from 'vitest';
import { AgentSpec, endingToolNames, unendingTools } from '../../api/agent.ts';
import { buildToolSet } from '../tools/tools.ts';
import { describeFields, finalTools, mayEndWith, type ResultFields, resultProblem } from './contract.ts';

const fields: ResultFields = {
  title: { type: 'string', required: true, description: 'a headline' },
  score: { type: 'integer', required: true, description: '' },
  tags: { type: 'array', required: false, description: '' },
};

describe('a turn contract: what may end a turn and what its result carries', () => {
  it('a payload is checked against the declared fields: JSON object, required fields, types; extra fields pass', () => {
    expect(resultProblem('{"title":"T","score":3}', fields)).toBeNull();
    expect(resultProblem('{"title":"T","score":3,"tags":["a"],"extra":true}', fields)).toBeNull();
    expect(resultProblem('not json', fields)).toMatch(
      /must be a JSON object with the fields title, score, tags/,
    );
    expect(resultProblem('[1]', fields)).toMatch(/must be a JSON object/);
    expect(resultProblem('{"title":"T"}', fields)).toMatch(/^score: /);
    expect(resultProblem('{"title":"T","score":2.5}', fields)).toMatch(/^score: .*int/i);
    expect(resultProblem('{"title":1,"score":2,"tags":"x"}', fields)).toMatch(/title: .*; tags: /);
    expect(resultProblem('anything at all', undefined)).toBeNull();
    expect(resultProblem('anything at all', {})).toBeNull();
  });

  it('must_end_with lists the calls that may end a turn; unset, any end is fine and the last step offers submit_result', () => {
    expect(endingToolNames(' publish , submit_result ,')).toEqual(['publish', 'submit_result']);
    expect(mayEndWith('submit_result', 'publish')).toBe(false);
    expect(mayEndWith('publish', 'publish')).toBe(true);
    expect(mayEndWith('anything', undefined)).toBe(true);
    expect(finalTools(undefined)).toEqual(['submit_result']);
    expect(finalTools('publish')).toEqual(['publish']);
  });

  it('submit_result is not offered when must_end_with leaves it out, and its description names the fields', () => {
    const without = buildToolSet([], { planning: false, memory: false, submit: false });
    expect(without.specs.map((s) => s.function.name)).not.toContain('submit_result');
    const withFields = buildToolSet([], {
      planning: false,
      memory: false,
      resultFields: describeFields(fields),
    });
    const submit = withFields.specs.find((s) => s.function.name === 'submit_result');
    expect(submit?.function.description).toContain('- title (string, required): a headline');
    expect(submit?.function.description).toContain('- tags (array, optional)');
  });

  it('refuses an agent whose must_end_with names a call that can never end a turn', () => {
    const tool = (name: string, terminate?: boolean) => ({ name, argv: ['true'], terminate });
    expect(unendingTools('submit_result, publish', [tool('publish', true)])).toEqual([]);
    expect(unendingTools('publish, lint', [tool('publish', true), tool('lint')])).toEqual(['lint']);
    const spec = (mustEndWith: string) =>
      AgentSpec.safeParse({
        bidding: { strategy: 'exclusive' },
        llm: { mustEndWith, tools: [{ name: 'lint', argv: ['true'] }] },
      });
    expect(spec('submit_result').success).toBe(true);
    const bad = spec('lint');
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]).toMatchObject({
      path: ['llm', 'mustEndWith'],
      message: 'lint cannot end a turn: name submit_result or a tool with terminate: true',
    });
  });
});
