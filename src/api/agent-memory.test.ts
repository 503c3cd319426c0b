import { describe, expect, it } from 'vitest';
import { loadLlmSettings } from '../llm/config.ts';
import { AgentSpec } from './agent.ts';
import { HoltFileError, parseHoltFile } from './holtfile.ts';
import { llmEnvironment } from './pupenv.ts';

const agent = (memory: unknown) =>
  AgentSpec.safeParse({ holt: 'h', role: 'Coder', bidding: { strategy: 'claim' }, llm: { memory } });

const fileAgent = (memory: string) =>
  parseHoltFile(`version: "2"
agents:
  Coder:
    bidding_strategy: exclusive
    llm:
      model: m
      memory: ${memory}
`).agents[0]!;

function fileProblems(memory: string): string[] {
  try {
    fileAgent(memory);
  } catch (e) {
    if (e instanceof HoltFileError) return e.problems;
    throw e;
  }
  throw new Error('expected the file to be refused');
}

describe('spec.llm.memory', () => {
  it('defaults: off, the agent scope, 5 recalled, kept 15 days, saved by itself, words only', () => {
    const r = agent({});
    expect(r.success && r.data.llm?.memory).toEqual({
      enabled: false,
      scope: 'agent',
      topK: 5,
      ttlDays: 15,
      auto: true,
    });
    const none = agent(undefined);
    expect(none.success && none.data.llm?.memory).toBeUndefined();
  });

  it('refuses a scope, topK or ttlDays out of range, an embeddings block without a model, a base URL that is none', () => {
    const refused = (memory: unknown) => {
      const r = agent(memory);
      return r.success ? [] : r.error.issues.map((i) => i.path.join('.'));
    };
    expect(refused({ scope: 'world' })).toEqual(['llm.memory.scope']);
    expect(refused({ topK: 21 })).toEqual(['llm.memory.topK']);
    expect(refused({ topK: -1 })).toEqual(['llm.memory.topK']);
    expect(refused({ topK: 2.5 })).toEqual(['llm.memory.topK']);
    expect(refused({ ttlDays: -1 })).toEqual(['llm.memory.ttlDays']);
    expect(refused({ embeddings: {} })).toEqual(['llm.memory.embeddings.model']);
    expect(refused({ embeddings: { model: 'e', baseUrl: 'not a url' } })).toEqual([
      'llm.memory.embeddings.baseUrl',
    ]);
    expect(refused({ enabled: true, topK: 0, ttlDays: 0, embeddings: { model: 'e' } })).toEqual([]);
  });
});

describe("spec.llm.memory → the pup's environment (HOLT_LLM_MEMORY*, read by src/llm/config.ts)", () => {
  it('an agent without memory, or with it off, gets no memory variable', () => {
    for (const m of [undefined, { enabled: false, topK: 9 }]) {
      const r = agent(m);
      if (!r.success) throw r.error;
      const env = llmEnvironment(r.data, undefined);
      expect(Object.keys(env).filter((k) => /MEMORY_|_MEMORY$|EMBEDDINGS/.test(k))).toEqual([
        'HOLT_LLM_WORKING_MEMORY_BYTES',
      ]);
    }
  });

  it('every field written as the pup reads it, and read back the same', () => {
    const r = agent({
      enabled: true,
      scope: 'holt',
      topK: 3,
      ttlDays: 0,
      auto: false,
      embeddings: { model: 'embed-small', baseUrl: 'http://embed:8081/v1' },
    });
    if (!r.success) throw r.error;
    const env = llmEnvironment(r.data, { model: 'm', baseUrl: 'http://llm/v1' });
    expect(env).toMatchObject({
      HOLT_LLM_MEMORY: 'true',
      HOLT_LLM_MEMORY_SCOPE: 'holt',
      HOLT_LLM_MEMORY_TOP_K: '3',
      HOLT_LLM_MEMORY_TTL_DAYS: '0',
      HOLT_LLM_MEMORY_AUTO: 'false',
      HOLT_LLM_EMBEDDINGS_MODEL: 'embed-small',
      HOLT_LLM_EMBEDDINGS_BASE_URL: 'http://embed:8081/v1',
    });
    expect(loadLlmSettings({ ...env, DATABASE_URL: 'postgres://x' })?.longMemory).toEqual({
      scope: 'holt',
      topK: 3,
      ttlDays: 0,
      auto: false,
      embeddings: { model: 'embed-small', baseUrl: 'http://embed:8081/v1' },
    });
  });

  it("the defaults read back as the defaults; the embeddings endpoint is the model's when not its own", () => {
    const r = agent({ enabled: true, embeddings: { model: 'embed-small' } });
    if (!r.success) throw r.error;
    const env = llmEnvironment(r.data, { model: 'm', baseUrl: 'http://llm/v1' });
    expect(env.HOLT_LLM_EMBEDDINGS_BASE_URL).toBeUndefined();
    expect(loadLlmSettings({ ...env, DATABASE_URL: 'postgres://x' })?.longMemory).toEqual({
      scope: 'agent',
      topK: 5,
      ttlDays: 15,
      auto: true,
      embeddings: { model: 'embed-small', baseUrl: 'http://llm/v1' },
    });
  });

  it('the Holt file says it in snake_case, with the same defaults and refusals', () => {
    const a = fileAgent(
      '{enabled: true, scope: holt, top_k: 8, ttl_days: 30, auto: false, embeddings: {model: e, base_url: "http://e/v1"}}',
    );
    expect(a.llm?.memory).toEqual({
      enabled: true,
      scope: 'holt',
      topK: 8,
      ttlDays: 30,
      auto: false,
      embeddings: { model: 'e', baseUrl: 'http://e/v1' },
    });
    expect(fileAgent('{enabled: true}').llm?.memory).toMatchObject({ scope: 'agent', topK: 5, ttlDays: 15 });
    expect(fileProblems('{enabled: true, top_k: 50}').join('\n')).toMatch(/agents\.Coder\.llm\.memory\.topK/);
    expect(fileProblems('{enabled: true, scope: everyone}').join('\n')).toMatch(/llm\.memory\.scope/);
    expect(fileProblems('{embeddings: {base_url: "http://e/v1"}}').join('\n')).toMatch(
      /llm\.memory\.embeddings\.model/,
    );
  });
});

describe('spec.llm.selfAudit', () => {
  it('on by default with no review; every field written as the pup reads it; the Holt file in snake_case', () => {
    const r = AgentSpec.safeParse({
      holt: 'h',
      role: 'Coder',
      bidding: { strategy: 'claim' },
      llm: { selfAudit: { reviewEveryTurns: 10, reviewPrompt: 'What would you change?' } },
    });
    if (!r.success) throw r.error;
    const env = llmEnvironment(r.data, { model: 'm', baseUrl: 'http://llm/v1' });
    expect(env).toMatchObject({ HOLT_LLM_SELF_AUDIT: 'true', HOLT_LLM_REVIEW_EVERY: '10' });
    const s = loadLlmSettings({ ...env, DATABASE_URL: 'postgres://x' });
    expect([s?.selfAudit, s?.reviewEvery, s?.reviewPrompt]).toEqual([true, 10, 'What would you change?']);
    // Without the block: audited, never reviewed.
    const plain = loadLlmSettings({ HOLT_LLM_ENABLED: 'true', DATABASE_URL: 'postgres://x' });
    expect([plain?.selfAudit, plain?.reviewEvery]).toEqual([true, 0]);
    const off = parseHoltFile(`version: "2"
agents:
  Coder:
    bidding_strategy: exclusive
    llm:
      model: m
      self_audit: {enabled: false}
`).agents[0]!;
    expect(llmEnvironment(off, undefined).HOLT_LLM_SELF_AUDIT).toBe('false');
    expect(
      AgentSpec.safeParse({
        holt: 'h',
        bidding: { strategy: 'claim' },
        llm: { selfAudit: { reviewEveryTurns: -1 } },
      }).success,
    ).toBe(false);
  });
});
