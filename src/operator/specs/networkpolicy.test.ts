import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import { cidrWithin } from '../../common/cidr.ts';
import {
  agentEgressPolicy,
  DEFAULT_CLUSTER_CIDRS,
  dnsDenied,
  networkPolicies,
  storeHostAliases,
} from './networkpolicy.ts';

const owner = {
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Agent',
  name: 'demo-writer',
  namespace: 'team',
  uid: 'u1',
};
const net = { operatorNamespace: 'holt-system', clusterCidrs: ['10.244.0.0/16', '10.96.0.0/12'] };
const agent = (over: Record<string, unknown> = {}) => ({
  holt: 'demo',
  role: 'Writer',
  egress: true,
  ...over,
});
type Spec = {
  egress: { to: { ipBlock: { cidr: string; except?: string[] } }[]; ports: { port: number }[] }[];
};
const specOf = (r: ReturnType<typeof agentEgressPolicy>) => r.policy?.spec as unknown as Spec;

describe('cidrWithin', () => {
  it('is containment within one family', () => {
    expect(cidrWithin('10.1.0.0/16', '10.0.0.0/8')).toBe(true);
    expect(cidrWithin('10.0.0.0/8', '10.0.0.0/8')).toBe(true);
    expect(cidrWithin('10.0.0.0/8', '10.1.0.0/16')).toBe(false);
    expect(cidrWithin('169.254.169.254/32', '169.254.0.0/16')).toBe(true);
    expect(cidrWithin('fd00:ec2::254/128', 'fc00::/7')).toBe(true);
    expect(cidrWithin('10.0.0.0/8', '::/0')).toBe(false);
    expect(cidrWithin('nonsense', '0.0.0.0/0')).toBe(false);
  });
});

describe("an Agent's egress policy", () => {
  it('none without egress', () => {
    expect(agentEgressPolicy(owner, agent({ egress: false }), undefined, net)).toEqual({ dropped: [] });
  });

  it('by default: the LLM endpoint port, anywhere outside the cluster and the metadata range', () => {
    const r = agentEgressPolicy(owner, agent(), 'http://models.example:11434/v1', net);
    const rule = specOf(r).egress[0];
    expect(rule?.ports).toEqual([{ protocol: 'TCP', port: 11434 }]);
    expect(rule?.to).toEqual([
      {
        ipBlock: {
          cidr: '0.0.0.0/0',
          except: ['169.254.0.0/16', '100.100.100.200/32', '10.244.0.0/16', '10.96.0.0/12'],
        },
      },
      { ipBlock: { cidr: '::/0', except: ['fd00:ec2::254/128', 'fe80::/10'] } },
    ]);
    expect(r.policy?.spec).toMatchObject({
      podSelector: {
        matchLabels: { 'holt.io/instance': 'demo', 'holt.io/role': 'Writer', 'holt.io/egress': 'true' },
      },
      policyTypes: ['Egress'],
    });
    // https without a port, or no endpoint at all: 443.
    expect(specOf(agentEgressPolicy(owner, agent(), 'https://api.example/v1', net)).egress[0]?.ports).toEqual(
      [{ protocol: 'TCP', port: 443 }],
    );
    expect(specOf(agentEgressPolicy(owner, agent(), undefined, net)).egress[0]?.ports[0]?.port).toBe(443);
  });

  it("every cloud's metadata address is excepted: link-local, Alibaba's 100.100.100.200, AWS's IPv6", () => {
    const r = agentEgressPolicy(
      owner,
      agent({ egressTo: { cidrs: ['100.64.0.0/10', '100.100.100.200/32', 'fd00:ec2::254/128'] } }),
      undefined,
      net,
    );
    // Alibaba's address lies in the carrier-grade NAT range, outside every private one: a CIDR that
    // holds it opens the rest, one that is it opens nothing.
    expect(r.dropped).toEqual(['100.100.100.200/32', 'fd00:ec2::254/128']);
    expect(specOf(r).egress[0]?.to).toEqual([
      { ipBlock: { cidr: '100.64.0.0/10', except: ['100.100.100.200/32'] } },
    ]);
  });

  it('declared CIDRs and ports; a CIDR inside an excepted range opens nothing and is reported', () => {
    const r = agentEgressPolicy(
      owner,
      agent({
        egressTo: { cidrs: ['203.0.113.0/24', '10.244.3.0/24', '169.254.169.254/32'], ports: [8443] },
      }),
      'https://api.example/v1',
      net,
    );
    expect(r.dropped).toEqual(['10.244.3.0/24', '169.254.169.254/32']);
    expect(specOf(r).egress).toEqual([
      { to: [{ ipBlock: { cidr: '203.0.113.0/24' } }], ports: [{ protocol: 'TCP', port: 8443 }] },
    ]);
    const none = agentEgressPolicy(owner, agent({ egressTo: { cidrs: ['10.96.0.1/32'] } }), undefined, net);
    expect(specOf(none).egress).toEqual([]);
  });

  it('the default cluster CIDRs except every private range', () => {
    const r = agentEgressPolicy(owner, agent(), undefined, { ...net, clusterCidrs: DEFAULT_CLUSTER_CIDRS });
    expect(specOf(r).egress[0]?.to[0]?.ipBlock.except).toEqual([
      '169.254.0.0/16',
      '100.100.100.200/32',
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
    ]);
  });
});

describe('in-cluster endpoints and the workspace seed', () => {
  it("pods named in egressTo.pods are reachable on the agent's ports, in its namespace or another", () => {
    const r = agentEgressPolicy(
      owner,
      agent({
        egressTo: {
          cidrs: ['203.0.113.0/24'],
          ports: [8000],
          pods: [{ labels: { app: 'vllm' } }, { namespace: 'models', labels: { app: 'ollama' } }],
        },
      }),
      undefined,
      net,
    );
    expect(specOf(r).egress).toEqual([
      {
        to: [
          { ipBlock: { cidr: '203.0.113.0/24' } },
          { podSelector: { matchLabels: { app: 'vllm' } } },
          {
            podSelector: { matchLabels: { app: 'ollama' } },
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'models' } },
          },
        ],
        ports: [{ protocol: 'TCP', port: 8000 }],
      },
    ]);
  });

  it("the seed Job reaches its Git server's port (in the cluster too), never the metadata range", () => {
    const holtOwner = { ...owner, kind: 'Holt', name: 'demo' };
    const spec = HoltSpec.parse({ workspace: { gitUrl: 'http://git.team.svc:3000/repo.git' } });
    const seed = networkPolicies(holtOwner, spec, net).find((p) => p.metadata.name === 'demo-seed-egress');
    expect(seed?.spec).toEqual({
      podSelector: {
        matchLabels: { 'holt.io/instance': 'demo', 'app.kubernetes.io/component': 'workspace-seed' },
      },
      policyTypes: ['Egress'],
      egress: [
        {
          to: [
            { ipBlock: { cidr: '0.0.0.0/0', except: ['169.254.0.0/16', '100.100.100.200/32'] } },
            { ipBlock: { cidr: '::/0', except: ['fd00:ec2::254/128', 'fe80::/10'] } },
            { namespaceSelector: {} },
          ],
          ports: [{ protocol: 'TCP', port: 3000 }],
        },
      ],
    });
    const none = networkPolicies(holtOwner, HoltSpec.parse({}), net);
    expect(none.map((p) => p.metadata.name)).toEqual([
      'demo-default-deny',
      'demo-dns',
      'demo-redis-ingress',
      'demo-nats-ingress',
      'demo-postgres-ingress',
    ]);
  });
});

describe('trace export', () => {
  const holtOwner = { ...owner, kind: 'Holt', name: 'demo' };
  const traceEgress = (endpoint: string) =>
    networkPolicies(holtOwner, HoltSpec.parse({ tracing: { endpoint } }), net).find(
      (p) => p.metadata.name === 'demo-trace-egress',
    )?.spec;

  it('a collector named as a Service: every pod of the Holt, sealed ones too, reaches its port in its namespace only', () => {
    expect(traceEgress('http://jaeger.observability.svc:4318')).toEqual({
      podSelector: { matchLabels: { 'holt.io/instance': 'demo' } },
      policyTypes: ['Egress'],
      egress: [
        {
          to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } } }],
          ports: [{ protocol: 'TCP', port: 4318 }],
        },
      ],
    });
    expect(traceEgress('http://jaeger.observability.svc.cluster.local:4318')).toMatchObject({
      egress: [
        { to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } } }] },
      ],
    });
  });

  it('any other collector: its port anywhere but the metadata range, for pods with DNS; none without one', () => {
    for (const [endpoint, port] of [
      ['https://otlp.example.com', 443],
      ['http://otel.example:4318', 4318],
      ['http://10.0.0.7:4318', 4318],
    ] as const)
      expect(traceEgress(endpoint), endpoint).toMatchObject({
        podSelector: {
          matchLabels: { 'holt.io/instance': 'demo' },
          matchExpressions: [{ key: 'holt.io/dns', operator: 'NotIn', values: ['deny'] }],
        },
        egress: [
          {
            to: expect.arrayContaining([
              { ipBlock: { cidr: '0.0.0.0/0', except: ['169.254.0.0/16', '100.100.100.200/32'] } },
              { namespaceSelector: {} },
            ]),
            ports: [{ protocol: 'TCP', port }],
          },
        ],
      });
    expect(
      networkPolicies(holtOwner, HoltSpec.parse({}), net).some(
        (p) => p.metadata.name === 'demo-trace-egress',
      ),
    ).toBe(false);
  });
});

describe('cluster DNS', () => {
  const holtOwner = { ...owner, kind: 'Holt', name: 'demo' };
  const bundled = HoltSpec.parse({}).stores;
  const external = HoltSpec.parse({
    stores: { nats: { mode: 'external', url: 'nats://n.example:4222' } },
  }).stores;

  it('is its own policy, for every Holt pod but those labelled holt.io/dns=deny; default-deny opens none', () => {
    const all = networkPolicies(holtOwner, HoltSpec.parse({}), net);
    const deny = all.find((p) => p.metadata.name === 'demo-default-deny');
    expect(JSON.stringify(deny?.spec)).not.toContain('kube-dns');
    expect(all.find((p) => p.metadata.name === 'demo-dns')?.spec).toEqual({
      podSelector: {
        matchLabels: { 'holt.io/instance': 'demo' },
        matchExpressions: [{ key: 'holt.io/dns', operator: 'NotIn', values: ['deny'] }],
      },
      policyTypes: ['Egress'],
      egress: [
        {
          to: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
              podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
            },
          ],
        },
      ],
    });
  });

  it('an agent goes without it when it has no egress and every store is bundled, or when it says so', () => {
    expect(dnsDenied({ egress: false }, bundled)).toBe(true);
    expect(dnsDenied({ egress: true }, bundled)).toBe(false);
    expect(dnsDenied({ egress: false }, external)).toBe(false);
    expect(dnsDenied({ egress: false, dns: 'allow' }, bundled)).toBe(false);
    expect(dnsDenied({ egress: true, dns: 'deny' }, external)).toBe(true);
  });

  it("its pods' /etc/hosts: each store Service's address under every name a URL uses; none without one", () => {
    expect(storeHostAliases('demo', 'team', { redis: '10.96.1.1', nats: 'None' })).toEqual([
      {
        ip: '10.96.1.1',
        hostnames: ['demo-redis', 'demo-redis.team.svc', 'demo-redis.team.svc.cluster.local'],
      },
    ]);
  });
});
