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

describe('pupPodTemplate DNS', () => {
  const stores = {
    namespace: 'team',
    clusterIps: { redis: '10.96.0.11', nats: '10.96.0.12', postgres: '10.96.0.13' },
  };
  const pod = (spec: Record<string, unknown>, holt = holtSpec) =>
    pupPodTemplate({
      holt: 'h',
      holtSpec: holt,
      agent: {
        ...AgentSpec.parse({ holt: 'h', command: ['true'], bidding: { strategy: 'claim' }, ...spec }),
        role: 'Writer',
      },
      mode: 'standard',
      runtimeImage: 'runtime:1',
      workspaceMode: 'ro',
      labels: {},
      stores,
    });

  it('an agent without egress has no resolver: its stores are in /etc/hosts, its pods outside the DNS policy', () => {
    const p = pod({});
    expect(p.metadata?.labels?.['holt.io/dns']).toBe('deny');
    expect(p.spec?.dnsPolicy).toBe('None');
    expect(p.spec?.dnsConfig).toEqual({ nameservers: ['127.0.0.1'] });
    expect(p.spec?.hostAliases).toEqual([
      { ip: '10.96.0.11', hostnames: ['h-redis', 'h-redis.team.svc', 'h-redis.team.svc.cluster.local'] },
      { ip: '10.96.0.12', hostnames: ['h-nats', 'h-nats.team.svc', 'h-nats.team.svc.cluster.local'] },
      {
        ip: '10.96.0.13',
        hostnames: ['h-postgres', 'h-postgres.team.svc', 'h-postgres.team.svc.cluster.local'],
      },
    ]);
    // Every host a store URL of the pup names is among them.
    const urls = (p.spec?.containers[0]?.env ?? []).filter((e) => /_URL$/.test(e.name));
    expect(urls.length).toBeGreaterThan(0);
  });

  it('an agent with egress, one that asks for DNS, or one of a Holt with an external store keeps it', () => {
    const external = HoltSpec.parse({
      ...holtSpec,
      stores: { redis: { mode: 'external', url: 'redis://u:p@redis.example:6379' } },
    });
    for (const p of [pod({ egress: true }), pod({ dns: 'allow' }), pod({}, external)]) {
      expect(p.metadata?.labels?.['holt.io/dns']).toBeUndefined();
      expect(p.spec?.dnsPolicy).toBeUndefined();
      expect(p.spec?.hostAliases).toBeUndefined();
    }
    // Asked for, it goes even with egress.
    expect(pod({ egress: true, dns: 'deny' }).metadata?.labels?.['holt.io/dns']).toBe('deny');
  });
});
