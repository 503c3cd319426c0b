import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ToolServerSpec } from '../../api/toolserver.ts';
import {
  resolveToolServers,
  serviceHostnames,
  type ToolServerView,
  toolServerLabels,
  toolServerObjects,
  toolServerUrl,
  toolServerUseLabel,
} from './toolserver.ts';

const owner = {
  apiVersion: 'holt.io/v1alpha1',
  kind: 'ToolServer',
  name: 'fs',
  namespace: 'team',
  uid: 'u1',
};
const net = { operatorNamespace: 'holt-system', clusterCidrs: ['10.0.0.0/8'] };
const RUNTIME = 'ghcr.io/holt-k8s/runtime:test';
const parse = (o: unknown) => ToolServerSpec.parse(o);
const kinds = (objs: { kind: string }[]) => objs.map((o) => o.kind);
type Container = { name: string; image: string; command?: string[]; env: { name: string }[] };
const podOf = (objs: ReturnType<typeof toolServerObjects>) =>
  (objs[0]!.spec as { template: { spec: { containers: Container[]; initContainers: Container[] } } }).template
    .spec;

describe('ToolServer spec', () => {
  it('takes image + command, image alone, or url, and refuses the rest with a clear message', () => {
    expect(parse({ image: 'x', command: ['npx', 'srv'] }).port).toBe(8080);
    expect(parse({ image: 'x', port: 3000, path: '/rpc' }).path).toBe('/rpc');
    expect(parse({ url: 'https://mcp.example.com/mcp' }).url).toBe('https://mcp.example.com/mcp');
    const both = ToolServerSpec.safeParse({ image: 'x', url: 'https://a.example/mcp' });
    expect(both.error?.issues[0]?.message).toMatch(/image .* or url .*not both/);
    expect(ToolServerSpec.safeParse({}).success).toBe(false);
    const urlCmd = ToolServerSpec.safeParse({ url: 'https://a.example/mcp', command: ['x'] });
    expect(urlCmd.error?.issues[0]?.message).toMatch(/runs nothing here/);
    expect(ToolServerSpec.safeParse({ url: 'ftp://a.example/' }).success).toBe(false);
    expect(ToolServerSpec.safeParse({ image: 'x', env: [{ name: 'REDIS_URL', value: 'r' }] }).success).toBe(
      false,
    );
  });

  it('accepts examples/mcp/toolserver.yaml', () => {
    const file = resolve(import.meta.dirname, '../../../examples/mcp/toolserver.yaml');
    const docs = parseAllDocuments(readFileSync(file, 'utf8')).map(
      (d) => d.toJS() as { kind: string; spec: unknown },
    );
    expect(docs.map((d) => d.kind)).toEqual(['ToolServer', 'ToolServer']);
    for (const d of docs) expect(ToolServerSpec.safeParse(d.spec).error).toBeUndefined();
  });
});

describe('ToolServer builders', () => {
  it('runs a stdio server behind holt mcp-bridge, copied from the runtime image, Host names of its Service', () => {
    const objs = toolServerObjects(
      owner,
      parse({ image: 'node:22', command: ['npx', 'srv', '/data'] }),
      RUNTIME,
      net,
    );
    expect(kinds(objs)).toEqual(['Deployment', 'Service', 'NetworkPolicy', 'NetworkPolicy']);
    const pod = podOf(objs);
    expect(pod.initContainers.map((c) => c.image)).toEqual([RUNTIME]);
    const c = pod.containers[0]!;
    expect(c.image).toBe('node:22');
    expect(c.command?.slice(0, 2)).toEqual(['/opt/holt/bin/holt', 'mcp-bridge']);
    expect(c.command?.slice(-4)).toEqual(['--', 'npx', 'srv', '/data']);
    for (const h of serviceHostnames('fs', 'team')) expect(c.command).toContain(h);
    expect(toolServerUrl('fs', 'team', parse({ image: 'x', command: ['y'] }))).toBe(
      'http://toolserver-fs.team.svc:8080/mcp',
    );
    expect(serviceHostnames('fs', 'team')).toContain('toolserver-fs.team.svc');
  });

  it('runs an HTTP server as its image says, and deploys nothing for a url', () => {
    const pod = podOf(toolServerObjects(owner, parse({ image: 'srv:1', port: 3000 }), RUNTIME, net));
    expect(pod.initContainers).toEqual([]);
    expect(pod.containers[0]!.command).toBeUndefined();
    const ext = parse({ url: 'https://mcp.example.com/mcp' });
    expect(toolServerObjects(owner, ext, RUNTIME, net)).toEqual([]);
    expect(toolServerUrl('fs', 'team', ext)).toBe('https://mcp.example.com/mcp');
  });

  it('passes Secret env to the server, never to agents; HOME is writable /tmp', () => {
    const spec = parse({
      image: 'x',
      command: ['y'],
      env: [{ name: 'TOKEN', secretKeyRef: { name: 's', key: 'k' } }],
    });
    const env = podOf(toolServerObjects(owner, spec, RUNTIME, net)).containers[0]!.env;
    expect(env).toEqual([
      { name: 'HOME', value: '/tmp' },
      { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
    ]);
  });

  it("admits only its Agents' pods and the operator, and egress only to DNS and what it declares", () => {
    const spec = parse({ image: 'x', command: ['y'], egress: [{ cidr: '203.0.113.0/24', ports: [443] }] });
    const np = toolServerObjects(owner, spec, RUNTIME, net)[2]!;
    const s = np.spec as {
      podSelector: { matchLabels: Record<string, string> };
      ingress: { from: Record<string, unknown>[]; ports: { port: number }[] }[];
      egress: { to: Record<string, unknown>[]; ports?: { port: number }[] }[];
    };
    expect(s.podSelector.matchLabels).toEqual({
      'app.kubernetes.io/instance': 'toolserver-fs',
      'app.kubernetes.io/component': 'toolserver',
    });
    expect(s.ingress).toHaveLength(1);
    expect(s.ingress[0]!.ports).toEqual([{ protocol: 'TCP', port: 8080 }]);
    expect(s.ingress[0]!.from).toEqual([
      { podSelector: { matchLabels: { [toolServerUseLabel('fs')]: 'use' } } },
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'holt-system' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'holt-operator' } },
      },
    ]);
    expect(s.egress).toHaveLength(2);
    expect(JSON.stringify(s.egress[0])).toContain('kube-dns');
    expect(s.egress[1]).toEqual({
      to: [{ ipBlock: { cidr: '203.0.113.0/24' } }],
      ports: [{ protocol: 'TCP', port: 443 }],
    });
  });

  it('lets the pods that use it reach it, and admits the Service IP as a Host once known', () => {
    const spec = parse({ image: 'x', command: ['y'] });
    const objs = toolServerObjects(owner, spec, RUNTIME, net, '10.96.0.7');
    expect(podOf(objs).containers[0]!.command).toContain('10.96.0.7');
    expect(objs[3]!.spec).toEqual({
      podSelector: { matchLabels: { 'toolservers.holt.io/fs': 'use' } },
      policyTypes: ['Egress'],
      egress: [
        {
          to: [
            {
              podSelector: {
                matchLabels: (objs[2]!.spec as { podSelector: { matchLabels: object } }).podSelector
                  .matchLabels,
              },
            },
          ],
          ports: [{ protocol: 'TCP', port: 8080 }],
        },
      ],
    });
    expect(toolServerLabels([{ name: 'fs' }, { name: 'web' }])).toEqual({
      'toolservers.holt.io/fs': 'use',
      'toolservers.holt.io/web': 'use',
    });
  });
});

describe("an Agent's ToolServers, resolved", () => {
  const refs = [
    { name: 'fs', tools: ['read'], requireApproval: ['read'] },
    { name: 'web', requireApproval: [] },
    { name: 'gone', requireApproval: [] },
    { name: 'new', requireApproval: [] },
  ];
  const views: Record<string, ToolServerView> = {
    fs: {
      spec: parse({ image: 'x', command: ['y'] }),
      clusterIp: '10.96.0.7',
      ready: true,
      message: '2 tools',
      tools: ['read', 'write'],
    },
    web: {
      spec: parse({ url: 'https://mcp.example.com/mcp' }),
      ready: false,
      message: 'cannot list tools at …',
    },
    new: { spec: parse({ image: 'x', port: 3000 }), ready: false, message: 'not yet reconciled' },
  };
  const r = resolveToolServers(refs, (n) => views[n]);

  it("gives the pup the in-cluster ones by Service IP, external ones by url, with the refs' tools and approvals", () => {
    expect(r.servers.map((s) => [s.name, s.url])).toEqual([
      ['fs', 'http://10.96.0.7:8080/mcp'],
      ['web', 'https://mcp.example.com/mcp'],
    ]);
    expect(r.servers[0]).toMatchObject({ tools: ['read'], requireApproval: ['read'], env: [] });
    expect(r.servers[1]!.tools).toBeUndefined();
  });

  it('names the missing and the not yet addressed, and keeps an unreachable one with why', () => {
    expect(r.status.map((s) => [s.name, s.ready, s.message])).toEqual([
      ['fs', true, '2 tools'],
      ['web', false, 'cannot list tools at …'],
      ['gone', false, 'ToolServer gone not found'],
      ['new', false, 'ToolServer new has no Service address yet'],
    ]);
    expect(r.status[0]!.tools).toEqual(['read', 'write']);
  });
});
