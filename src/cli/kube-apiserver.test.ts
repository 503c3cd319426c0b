import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube, writeKubeconfig } from '../../test/harness/kube.ts';
import { startRedis } from '../../test/harness/redis.ts';
import { Blackboard } from '../blackboard/client.ts';
import { writeMcpStatus } from '../blackboard/mcp-status.ts';
import { setAgents } from '../blackboard/registry.ts';

/**
 * `holt --kube` against a real API server, where the API server is the judge: a missing Holt, a user
 * without the right to read it, a Holt whose Redis or Postgres has no ready pod, tokens read from
 * Agents and Secrets with the user's own rights, `status` on a Holt whose Redis is reached at its own
 * URL (the agents' MCP servers that are down). (No kubelet here, so no port-forward and no pod log:
 * every command working on a real Holt is the real-node e2e's, e2e/cluster/sections/cli.ts.)
 */
const HOLT = join(import.meta.dirname, '..', '..', 'bin', 'holt');
const run = promisify(execFile);
let kube: KubeCluster;

async function holt(
  kubeconfig: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(HOLT, args, { env: { ...process.env, KUBECONFIG: kubeconfig, NO_COLOR: '1' } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

beforeAll(async () => {
  kube = await startKube();
  await kube.kubectl(['apply', '--server-side', '-f', join(import.meta.dirname, '..', '..', 'crds')]);
  await kube.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  await kube.kubectl(['apply', '-f', '-'], {
    input: 'apiVersion: holt.io/v1alpha1\nkind: Holt\nmetadata: {name: demo, namespace: default}\nspec: {}\n',
  });
}, 120_000);

afterAll(async () => {
  await kube?.stop();
});

describe('holt --kube against the API server', () => {
  it('a Holt that does not exist: exit 3, named with its namespace', async () => {
    const r = await holt(kube.kubeconfigPath, ['--kube', 'default/nope', 'hoard']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('Holt default/nope not found');
  });

  it('a Holt no operator has reconciled (no status): says which operator watches what (issue 29)', async () => {
    const none = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'status']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('Holt default/demo has no status yet');
    expect(none.stderr).toContain('no Holt operator runs in this cluster');
    // The chart's operator, watching another namespace (no kubelet here: the Deployment object is enough).
    await kube.kubectl(['create', 'namespace', 'holt-system']);
    await kube.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {
          name: 'holt-operator',
          namespace: 'holt-system',
          labels: { 'app.kubernetes.io/name': 'holt-operator' },
        },
        spec: {
          selector: { matchLabels: { app: 'op' } },
          template: {
            metadata: { labels: { app: 'op' } },
            spec: {
              containers: [
                {
                  name: 'operator',
                  image: 'op',
                  env: [{ name: 'HOLT_OPERATOR_NAMESPACES', value: 'team-a' }],
                },
              ],
            },
          },
        },
      }),
    });
    const r = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'status']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('namespace default is not watched (holt-system/holt-operator watches team-a)');
    expect(r.stderr).toContain('watchNamespaces={...,default}');
  });

  it('a bundled Redis without a ready pod: a clear error, not a hang', async () => {
    await kube.kubectl(['create', 'service', 'clusterip', 'demo-redis', '--tcp=6379:6379', '-n', 'default']);
    const r = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'hoard']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the Redis of Holt default\/demo is not ready yet \(no pod\)/);
  });

  it('a user without the right to read Holts is told what the API server forbade', async () => {
    await kube.kubectl(['create', 'serviceaccount', 'nobody', '-n', 'default']);
    const token = (
      await kube.kubectl(['create', 'token', 'nobody', '-n', 'default', '--duration=1h'])
    ).trim();
    const kc = join(kube.dir, 'nobody.kubeconfig');
    writeKubeconfig(kc, kube.server, kube.caPath, 'nobody', token);
    const r = await holt(kc, ['--kube', 'default/demo', 'status']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/forbidden: .*cannot get resource "holts" in API group "holt.io"/);
    // The token never appears in what the user sees.
    expect(r.stderr).not.toContain(token);
  });

  it('logs, send and token need no store: logs of a role without pods is "not found", not "Redis not ready"', async () => {
    const r = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'logs', 'Watcher']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("no pods of 'Watcher' in Holt default/demo");
    // A pod not started yet (no kubelet here: it stays Pending) has no log: said, not a failed read.
    await kube.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: 'demo-watcher-0',
          namespace: 'default',
          labels: { 'holt.io/instance': 'demo', 'holt.io/role': 'Watcher' },
        },
        spec: { containers: [{ name: 'pup', image: 'pup' }] },
      }),
    });
    const pending = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'logs', 'Watcher']);
    expect(pending.code).toBe(1);
    expect(pending.stderr).toContain("no pod of 'Watcher' has started yet (demo-watcher-0: Pending)");
  });

  it('work, life and memory: a bundled Postgres without a ready pod is a clear error', async () => {
    await kube.kubectl([
      'create',
      'service',
      'clusterip',
      'demo-postgres',
      '--tcp=5432:5432',
      '-n',
      'default',
    ]);
    for (const args of [
      ['work', 'list'],
      ['life', 'show', 'Watcher'],
      ['memory', 'list'],
      ['memory', 'search', 'Watcher', 'deploy'],
      ['memory', 'forget', '--role', 'Watcher', '--all'],
    ]) {
      const r = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', ...args]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/the Postgres of Holt default\/demo is not ready yet \(no pod\)/);
    }
    // Commands that have no meaning on a cluster say so.
    const scale = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'scale', 'Watcher', '2']);
    expect(scale.code).toBe(2);
    expect(scale.stderr).toContain('`scale` works on local instances only');
  });

  it("token list and show read the Agent's spec.ingress and its Secrets with the user's own rights", async () => {
    const agent = (name: string, role: string, ingress?: object) => ({
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name, namespace: 'default' },
      spec: {
        holt: 'demo',
        role,
        bidding: { strategy: 'ignore' },
        llm: { model: 'm' },
        ...(ingress ? { ingress } : {}),
      },
    });
    await kube.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          agent('demo-watcher', 'Watcher', {
            enabled: true,
            tokens: [{ name: 'ci' }, { name: 'ops', origin: 'operator', modes: ['enqueue_message'] }],
          }),
          agent('demo-quiet', 'Quiet'),
          // Another Holt's Agent: never listed under demo.
          {
            ...agent('other-watcher', 'Other', { enabled: true }),
            spec: { ...agent('x', 'Other').spec, holt: 'other', ingress: { enabled: true } },
          },
        ],
      }),
    });
    await kube.kubectl([
      'create',
      'secret',
      'generic',
      'demo-watcher-ingress-ci',
      '--from-literal=token=tok-ci-1',
      '-n',
      'default',
    ]);
    const list = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'token', 'list', '-j']);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([
      expect.objectContaining({
        name: 'ci',
        role: 'Watcher',
        origin: 'webhook',
        secretName: 'demo-watcher-ingress-ci',
      }),
      expect.objectContaining({
        name: 'ops',
        role: 'Watcher',
        origin: 'operator',
        modes: ['enqueue_message'],
        secretName: 'demo-watcher-ingress-ops',
      }),
    ]);
    expect(list.stdout).not.toContain('tok-ci-1');
    const table = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'token', 'list', 'Quiet']);
    expect(table.stdout).toContain('No tokens for Quiet');
    const show = await holt(kube.kubeconfigPath, [
      '--kube',
      'default/demo',
      'token',
      'show',
      'Watcher',
      'ci',
    ]);
    expect(show).toMatchObject({ code: 0, stdout: 'tok-ci-1\n' });
    // Its Secret not made yet (no operator here), an unknown token, an unknown agent: each said plainly.
    const ops = await holt(kube.kubeconfigPath, [
      '--kube',
      'default/demo',
      'token',
      'show',
      'Watcher',
      'ops',
    ]);
    expect(ops.code).toBe(3);
    expect(ops.stderr).toContain('Secret default/demo-watcher-ingress-ops not found');
    const none = await holt(kube.kubeconfigPath, [
      '--kube',
      'default/demo',
      'token',
      'show',
      'Watcher',
      'nope',
    ]);
    expect(none.code).toBe(3);
    expect(none.stderr).toContain('agent Watcher of Holt default/demo has no token nope');
    const other = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'token', 'list', 'Other']);
    expect(other.code).toBe(3);
    expect(other.stderr).toContain('Holt default/demo has no agent Other (agents: Quiet, Watcher)');
    // send without --token takes the operator token: the one whose Secret is missing here.
    const send = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'send', 'Watcher', 'hi']);
    expect(send.code).toBe(3);
    expect(send.stderr).toContain('Secret default/demo-watcher-ingress-ops not found');
    // So do life tasks and cancel (the orchestrator's ingress API), with any operator token.
    const tasks = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'life', 'tasks', 'Watcher']);
    expect(tasks.code).toBe(3);
    expect(tasks.stderr).toContain('Secret default/demo-watcher-ingress-ops not found');
    // Tokens are made and revoked in the Agent's spec, not by the CLI.
    const create = await holt(kube.kubeconfigPath, ['--kube', 'default/demo', 'token', 'create', 'Watcher']);
    expect(create.code).toBe(2);
    expect(create.stderr).toContain("on a cluster an agent's tokens are its Agent's spec.ingress.tokens");

    // A user who may read Holts and Agents but not Secrets: the list, but never a token.
    await kube.kubectl(['create', 'serviceaccount', 'reader', '-n', 'default']);
    await kube.kubectl([
      'create',
      'role',
      'reader',
      '--verb=get,list',
      '--resource=holts.holt.io,agents.holt.io',
      '-n',
      'default',
    ]);
    await kube.kubectl([
      'create',
      'rolebinding',
      'reader',
      '--role=reader',
      '--serviceaccount=default:reader',
      '-n',
      'default',
    ]);
    const token = (
      await kube.kubectl(['create', 'token', 'reader', '-n', 'default', '--duration=1h'])
    ).trim();
    const kc = join(kube.dir, 'reader.kubeconfig');
    writeKubeconfig(kc, kube.server, kube.caPath, 'reader', token);
    const listed = await holt(kc, ['--kube', 'default/demo', 'token', 'list']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/ci\s+demo-watcher\s+Watcher/);
    const refused = await holt(kc, ['--kube', 'default/demo', 'token', 'show', 'Watcher', 'ci']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/forbidden: .*cannot get resource "secrets"/);
    expect(refused.stdout).not.toContain('tok-ci-1');
  });

  it('status names each MCP server that is down, per agent, with why (a Redis reached at its own URL)', async () => {
    const redis = await startRedis();
    const bb = Blackboard.connect(redis.url, 'ext');
    try {
      await kube.kubectl(['create', 'secret', 'generic', 'ext-redis', `--from-literal=url=${redis.url}`]);
      await kube.kubectl(['apply', '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'holt.io/v1alpha1',
          kind: 'Holt',
          metadata: { name: 'ext', namespace: 'default' },
          spec: { stores: { redis: { mode: 'external', urlSecretRef: { name: 'ext-redis', key: 'url' } } } },
        }),
      });
      await setAgents(bb, [{ role: 'writer' }, { role: 'coder' }] as Parameters<typeof setAgents>[1]);
      const at = Date.now() - 90_000;
      // As the writer's pup publishes it (src/llm/mcp/status.ts).
      await writeMcpStatus(bb.redis, 'ext', 'writer', {
        updated_at_ms: at,
        servers: [
          { name: 'tiny', state: 'connected', tools: ['touch'], since_ms: at },
          {
            name: 'broken',
            state: 'refused',
            tools: [],
            reason: 'its command cannot be started (ENOENT)',
            since_ms: at,
          },
        ],
      });
      const r = await holt(kube.kubeconfigPath, ['--kube', 'default/ext', 'status']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('MCP servers not connected: 1 of 2');
      expect(r.stdout).toMatch(
        /writer\s+broken\s+refused\s+\d+m \d+s ago\s+its command cannot be started \(ENOENT\)/,
      );
      expect(r.stdout).not.toMatch(/writer\s+tiny/);
      const json = JSON.parse(
        (await holt(kube.kubeconfigPath, ['--kube', 'default/ext', 'status', '--json'])).stdout,
      ) as { mcp_servers?: Record<string, { servers: { name: string; state: string }[] }> };
      expect(json.mcp_servers?.writer?.servers.map((x) => `${x.name}=${x.state}`)).toEqual([
        'tiny=connected',
        'broken=refused',
      ]);
    } finally {
      await bb.close();
      await redis.stop();
    }
  });
});
