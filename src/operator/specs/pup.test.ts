import { describe, expect, it } from 'vitest';
import { AgentSpec } from '../../api/agent.ts';
import { HoltSpec } from '../../api/holt.ts';
import { pupPodTemplate } from './pup.ts';

const holtSpec = HoltSpec.parse({
  llm: {
    baseUrl: 'http://holt-default/v1',
    model: 'holt-model',
    apiKeySecretRef: { name: 'llm', key: 'key' },
  },
});

function podOf(spec: Record<string, unknown>) {
  const agent = {
    ...AgentSpec.parse({ holt: 'h', bidding: { strategy: 'claim' }, ...spec }),
    role: 'Writer',
  };
  return pupPodTemplate({
    holt: 'h',
    holtSpec,
    agent,
    mode: 'standard',
    runtimeImage: 'runtime:1',
    workspaceMode: 'ro',
    labels: {},
  });
}

function envOf(spec: Record<string, unknown>) {
  return podOf(spec).spec?.containers[0]?.env ?? [];
}

describe('pupPodTemplate env', () => {
  it("an LLM agent's own model and baseUrl are set once each, over the Holt's defaults", () => {
    const env = envOf({ llm: { model: 'own-model', baseUrl: 'http://own/v1', tools: [] } });
    const names = env.map((e) => e.name);
    expect(names.length).toBe(new Set(names).size);
    const value = (n: string) => env.find((e) => e.name === n);
    expect(value('HOLT_LLM_MODEL')?.value).toBe('own-model');
    expect(value('HOLT_LLM_BASE_URL')?.value).toBe('http://own/v1');
    expect(value('HOLT_LLM_API_KEY')?.valueFrom?.secretKeyRef).toEqual({ name: 'llm', key: 'key' });
    expect(names).not.toContain('HOLT_LLM_CONFIG');
  });

  it("an LLM agent without its own gets the Holt's model and endpoint", () => {
    const env = envOf({ llm: { tools: [] } });
    expect(env.find((e) => e.name === 'HOLT_LLM_MODEL')?.value).toBe('holt-model');
    expect(env.find((e) => e.name === 'HOLT_LLM_BASE_URL')?.value).toBe('http://holt-default/v1');
  });

  it('a user variable named like a runtime one is refused by the schema', () => {
    const r = AgentSpec.safeParse({
      holt: 'h',
      command: ['x'],
      bidding: { strategy: 'claim' },
      env: [{ name: 'NATS_URL', value: 'x' }],
    });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toMatch(/the runtime sets this variable itself/);
  });
});

describe('pupPodTemplate scrape hints', () => {
  it("every pup pod says where its metrics are (the pup's health port)", () => {
    expect(podOf({ command: ['/app/run.sh'] }).metadata?.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '8080',
      'prometheus.io/path': '/metrics',
    });
  });
});
