import { describe, expect, it } from 'vitest';
import { AgentSpec } from '../../api/agent.ts';
import { HoltSpec } from '../../api/holt.ts';
import { ownerOf } from './meta.ts';
import { orchestratorDeployment } from './orchestrator.ts';
import { pupPodTemplate } from './pup.ts';

const owner = ownerOf({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Holt',
  metadata: { name: 'h', namespace: 'ns', uid: 'u1' },
});

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

  it("an Agent's spec.llm.memory reaches its pup as HOLT_LLM_MEMORY*, as holt up writes it", () => {
    const env = envOf({ llm: { memory: { enabled: true, topK: 2, embeddings: { model: 'embed' } } } });
    const value = (n: string) => env.find((e) => e.name === n)?.value;
    expect(value('HOLT_LLM_MEMORY')).toBe('true');
    expect(value('HOLT_LLM_MEMORY_SCOPE')).toBe('agent');
    expect(value('HOLT_LLM_MEMORY_TOP_K')).toBe('2');
    expect(value('HOLT_LLM_MEMORY_TTL_DAYS')).toBe('15');
    expect(value('HOLT_LLM_MEMORY_AUTO')).toBe('true');
    expect(value('HOLT_LLM_EMBEDDINGS_MODEL')).toBe('embed');
    expect(env.map((e) => e.name)).not.toContain('HOLT_LLM_EMBEDDINGS_BASE_URL');
    expect(envOf({ llm: { tools: [] } }).map((e) => e.name)).not.toContain('HOLT_LLM_MEMORY');
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

  it("a trace collector named as a Service is in a sealed pod's /etc/hosts, by the host its endpoint names", () => {
    const traced = HoltSpec.parse({ ...holtSpec, tracing: { endpoint: 'http://jaeger.obs.svc:4318' } });
    const p = pupPodTemplate({
      holt: 'h',
      holtSpec: traced,
      agent: {
        ...AgentSpec.parse({ holt: 'h', command: ['true'], bidding: { strategy: 'claim' } }),
        role: 'W',
      },
      mode: 'standard',
      runtimeImage: 'runtime:1',
      workspaceMode: 'ro',
      labels: {},
      stores: { ...stores, collector: { host: 'jaeger.obs.svc', ip: '10.96.0.50' } },
    });
    expect(p.spec?.hostAliases?.at(-1)).toEqual({ ip: '10.96.0.50', hostnames: ['jaeger.obs.svc'] });
    const env = p.spec?.containers.find((c) => c.name === 'pup')?.env ?? [];
    expect(env).toContainEqual({ name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://jaeger.obs.svc:4318' });
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

describe('spec.tracing', () => {
  const tracing = {
    endpoint: 'http://collector.obs:4318',
    samplerRatio: 0.25,
    headersSecretRef: { name: 'otlp', key: 'headers' },
  };
  const traced = HoltSpec.parse({ tracing });
  const names = (env: { name: string }[] | undefined) => (env ?? []).map((e) => e.name);

  it('the pup and the orchestrator export to the endpoint, the headers from the Secret; the agent container gets none', () => {
    const agent = {
      ...AgentSpec.parse({ holt: 'h', bidding: { strategy: 'claim' }, command: ['/bin/true'] }),
      role: 'Writer',
    };
    const pod = pupPodTemplate({
      holt: 'h',
      holtSpec: traced,
      agent,
      mode: 'standard',
      runtimeImage: 'runtime:1',
      workspaceMode: 'ro',
      labels: {},
    });
    const [pup, tools] = pod.spec?.containers ?? [];
    expect(pup?.env).toEqual(
      expect.arrayContaining([
        { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: tracing.endpoint },
        { name: 'OTEL_TRACES_SAMPLER', value: 'parentbased_traceidratio' },
        { name: 'OTEL_TRACES_SAMPLER_ARG', value: '0.25' },
        { name: 'OTEL_EXPORTER_OTLP_HEADERS', valueFrom: { secretKeyRef: { name: 'otlp', key: 'headers' } } },
      ]),
    );
    expect(names(tools?.env).filter((n) => n.startsWith('OTEL_'))).toEqual([]);
    const orch = orchestratorDeployment(owner, traced, 'img') as unknown as {
      spec: { template: { spec: { containers: { env: { name: string }[] }[] } } };
    };
    expect(names(orch.spec.template.spec.containers[0]?.env)).toContain('OTEL_EXPORTER_OTLP_ENDPOINT');
  });

  it('without an endpoint no OTEL_ variable is set; a bad endpoint or ratio is refused by the schema', () => {
    expect(names(envOf({ command: ['/bin/true'] })).filter((n) => n.startsWith('OTEL_'))).toEqual([]);
    expect(HoltSpec.safeParse({ tracing: { endpoint: 'not a url' } }).success).toBe(false);
    expect(HoltSpec.safeParse({ tracing: { endpoint: 'http://c:4318', samplerRatio: 2 } }).success).toBe(
      false,
    );
  });
});
