import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSpansToJaeger, type JaegerSpans } from '../../../test/harness/jaeger-spans.ts';
import type { KubeCluster } from '../../../test/harness/kube.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { EVERYTHING_JS } from '../../llm/mcp/mcp.testkit.ts';
import { testBridge } from '../../mcp-bridge/bridge.testkit.ts';
import type { Bridge } from '../../mcp-bridge/bridge.ts';
import type { KubeClient, KubeObject } from '../kube/kube.ts';
import type { Operator } from '../operator.ts';
import { agentObject, holtObject, startKubeWithCrds, startOperator } from '../testkit.ts';

const NS = 'tools';
let kube: KubeCluster;
let admin: KubeClient;
let op: Operator;
let bridge: Bridge;

const toolServer = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'ToolServer',
  metadata: { name, namespace: NS },
  spec,
});
type Status = {
  url?: string;
  tools?: { name: string }[];
  conditions?: { type: string; status: string; reason: string; message: string }[];
};
const statusOf = async (name: string) => ((await admin.get('ToolServer', NS, name))?.status ?? {}) as Status;
const ready = (s: Status) => s.conditions?.find((c) => c.type === 'Ready');

/** A port nothing listens on (bound, then closed). */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

// Each reconcile is a span (src/operator/operator.ts), exported to a real Jaeger; the last test reads them.
let jaeger: JaegerSpans;

beforeAll(async () => {
  jaeger = await exportSpansToJaeger('operator');
  ({ kube, admin } = await startKubeWithCrds(NS));
  op = await startOperator(kube, NS, { toolServerRefreshMs: 300 });
  // No kubelet here: the server runs on this machine behind the bridge, named by a url ToolServer.
  bridge = await testBridge([EVERYTHING_JS]);
});
afterAll(async () => {
  await op?.stop();
  await jaeger?.stop();
  await bridge?.close();
  admin?.close();
  await kube?.stop();
});

describe('ToolServer controller on a real API server', () => {
  it("lists a reachable server's tools in status, Ready, and closes its sessions", async () => {
    const url = `http://127.0.0.1:${bridge.port}/mcp`;
    await admin.create(toolServer('everything', { url }));
    const s = await eventually('tools listed', async () => {
      const st = await statusOf('everything');
      return ready(st)?.status === 'True' ? st : undefined;
    });
    expect(s.url).toBe(url);
    expect(s.tools?.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'get-sum']));
    expect(ready(s)?.reason).toBe('ToolsListed');
    // Each discovery ends its session: the bridge keeps no process per refresh.
    await eventually('no session left open', () => bridge.sessions() === 0);
  });

  it('names an unreachable server in a clear condition, and lists its tools once it answers', async () => {
    const port = await closedPort();
    await admin.create(toolServer('later', { url: `http://127.0.0.1:${port}/mcp` }));
    const s = await eventually('unreachable reported', async () => {
      const st = await statusOf('later');
      return ready(st)?.reason === 'Unreachable' ? st : undefined;
    });
    expect(ready(s)?.status).toBe('False');
    expect(ready(s)?.message).toContain(`cannot list tools at http://127.0.0.1:${port}/mcp`);
    expect(s.tools).toBeUndefined();
    // The spec points at the live server: the next reconcile (a spec change) discovers at once.
    await admin.mergePatch('ToolServer', NS, 'later', {
      spec: { url: `http://127.0.0.1:${bridge.port}/mcp` },
    });
    await eventually(
      'listed after the change',
      async () => ready(await statusOf('later'))?.status === 'True',
    );
  });

  it('writes no response text of what its url answers to status (the operator may reach what users cannot)', async () => {
    const inner = createHttpServer((_req, res) =>
      res.writeHead(500, { 'content-type': 'text/plain' }).end('internal-secret-123'),
    );
    await new Promise<void>((r) => inner.listen(0, '127.0.0.1', () => r()));
    try {
      const { port } = inner.address() as { port: number };
      await admin.create(toolServer('inner', { url: `http://127.0.0.1:${port}/mcp` }));
      const s = await eventually('reported', async () => {
        const st = await statusOf('inner');
        return ready(st)?.reason === 'Unreachable' ? st : undefined;
      });
      expect(ready(s)?.message).toBe(`cannot list tools at http://127.0.0.1:${port}/mcp: HTTP 500`);
      expect(JSON.stringify(s)).not.toContain('internal-secret');
    } finally {
      await new Promise<void>((r) => inner.close(() => r()));
    }
  });

  it('deploys a stdio server with its Service and NetworkPolicy, owned by the ToolServer', async () => {
    const ts = await admin.create(toolServer('fs', { image: 'node:22', command: ['npx', 'srv'] }));
    for (const kind of ['Deployment', 'Service', 'NetworkPolicy'])
      await eventually(`${kind} applied`, async () => {
        const o = await admin.get(kind, NS, 'toolserver-fs');
        return o?.metadata.ownerReferences?.[0]?.uid === ts.metadata.uid;
      });
    // No kubelet: the pod never becomes ready, and status says so rather than trying to connect.
    const s = await eventually('waiting reported', async () => {
      const st = await statusOf('fs');
      return ready(st)?.reason && ready(st)?.reason !== 'Unreachable' ? st : undefined;
    });
    expect(ready(s)?.status).toBe('False');
    expect(s.url).toBe(`http://toolserver-fs.${NS}.svc:8080/mcp`);
  });

  it('is refused by the API server with image and url both, in the words of the schema', async () => {
    await expect(
      admin.create(toolServer('both', { image: 'x', url: 'https://a.example/mcp' })),
    ).rejects.toThrow(/set image \(a server in the cluster\) or url \(an external one\), not both/);
  });

  it("gives an Agent's pup its ToolServers, labels its pods for their policies, lists their tools, names a missing one", async () => {
    await admin.create(
      holtObject(NS, 'h', { llm: { model: 'm', apiKeySecretRef: { name: 'llm', key: 'key' } } }),
    );
    await admin.create(
      agentObject(NS, 'user', {
        holt: 'h',
        bidding: { strategy: 'exclusive' },
        llm: {
          mcpServers: [{ name: 'own', url: 'https://own.example/mcp' }],
          toolServers: [
            { name: 'everything', tools: ['echo'], requireApproval: ['echo'] },
            { name: 'missing' },
          ],
        },
      }),
    );
    type St = {
      toolServers?: { name: string; url?: string; ready: boolean; message: string; tools?: string[] }[];
    };
    const st = await eventually('the Agent lists its ToolServers', async () => {
      const a = (await admin.get('Agent', NS, 'user'))?.status as St | undefined;
      return a?.toolServers?.find((t) => t.name === 'everything')?.tools ? a : undefined;
    });
    const url = `http://127.0.0.1:${bridge.port}/mcp`;
    expect(st.toolServers).toEqual([
      expect.objectContaining({ name: 'everything', url, ready: true }),
      { name: 'missing', ready: false, message: 'ToolServer missing not found' },
    ]);
    expect(st.toolServers?.[0]?.tools).toEqual(expect.arrayContaining(['echo', 'get-sum']));
    const ready = (
      (await admin.get('Agent', NS, 'user'))!.status as { conditions?: { type: string; message: string }[] }
    ).conditions?.find((c) => c.type === 'Ready');
    expect(ready?.message).toContain('ToolServer missing: ToolServer missing not found');
    // The pup is given its own server and the resolved one; the missing one is left out.
    const dep = await admin.get('Deployment', NS, 'user');
    const tpl = (
      dep!.spec as {
        template: {
          metadata: { labels: Record<string, string> };
          spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] };
        };
      }
    ).template;
    const pup = tpl.spec.containers.find((c) => c.name === 'pup')!;
    const servers = JSON.parse(pup.env!.find((e) => e.name === 'HOLT_LLM_MCP_SERVERS')!.value!) as {
      name: string;
      url?: string;
      tools?: string[];
      requireApproval: string[];
    }[];
    expect(servers.map((x) => x.name)).toEqual(['own', 'everything']);
    expect(servers[1]).toMatchObject({ url, tools: ['echo'], requireApproval: ['echo'] });
    expect(tpl.metadata.labels).toMatchObject({
      'toolservers.holt.io/everything': 'use',
      'toolservers.holt.io/missing': 'use',
    });
    // Created later, the missing server joins without an edit of the Agent.
    await admin.create(toolServer('missing', { url }));
    await eventually('the late ToolServer resolved', async () => {
      const a = (await admin.get('Agent', NS, 'user'))?.status as St | undefined;
      return a?.toolServers?.find((t) => t.name === 'missing')?.ready === true;
    });
  });

  it('refuses an Agent naming a ToolServer as one of its own MCP servers', async () => {
    await expect(
      admin.create(
        agentObject(NS, 'twice', {
          holt: 'h',
          bidding: { strategy: 'exclusive' },
          llm: {
            mcpServers: [{ name: 'everything', url: 'https://a.example/mcp' }],
            toolServers: [{ name: 'everything' }],
          },
        }),
      ),
    ).resolves.toBeDefined(); // the API server has no cross-list rule; the operator refuses it:
    await eventually('InvalidSpec', async () => {
      const c = (
        (await admin.get('Agent', NS, 'twice'))?.status as
          | { conditions?: { type: string; reason: string; message: string }[] }
          | undefined
      )?.conditions?.find((x) => x.type === 'Ready');
      return c?.reason === 'InvalidSpec' && c.message.includes('MCP server everything is named twice');
    });
  });

  it('each reconcile is a span naming the kind, namespace and object', async () => {
    const everything = await jaeger.find('holt-operator', 'reconcile ToolServer', {
      'holt.name': 'everything',
    });
    expect(everything.length).toBeGreaterThan(0);
    expect(everything[0]!.attributes).toMatchObject({ 'k8s.namespace.name': NS, 'holt.kind': 'ToolServer' });
    expect(everything[0]!.parentSpanId).toBeUndefined();
  });
});
