import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { consoleLink } from '../../../test/harness/console-cli.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { DEMO_LLM_PLAN } from '../../demo-llm-script.ts';
import {
  CLUSTER_WAIT,
  c,
  getJson,
  holt,
  kubectl,
  NS,
  onNode,
  type Pod,
  pods,
  ROOT,
  trailOf,
  waitHoltReady,
} from '../ctx.ts';
import { llmServer, toolService } from '../fixtures.ts';
import { LIVING_SCRIPT, livingManifests, llmManifests } from '../manifests.ts';

/** The real cluster: LLM agents and a living agent on their scripted models. */
export function llmTests(): void {
  it('an LLM Agent with its own model and baseUrl, from `holt convert`, finishes its turns against the scripted model pod', async () => {
    await kubectl(['apply', '-f', '-'], await llmManifests());
    await waitHoltReady('demo-llm', 3);
    const out = await holt('demo-llm', ['forage', '--goal', 'Plan a CHANGELOG', '--watch']);
    expect(out).toContain('Workflow completed');
    const trail = await trailOf('demo-llm');
    expect(trail.map((a) => a.type)).toEqual(['GoalDefined', 'Draft', 'Review', 'WorkflowComplete']);
    expect(trail.find((a) => a.type === 'Draft')?.payload).toBe(DEMO_LLM_PLAN);
    // Each agent asked for its own model at the scripted server.
    const logs = await kubectl(['logs', 'deploy/llm']);
    const models = logs
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => (JSON.parse(l) as { model: string }).model);
    expect(new Set(models)).toEqual(new Set(['scripted-writer', 'scripted-reviewer', 'scripted-finisher']));
  }, 900_000);

  it('a living agent: a curl with its token queues a message; a work item, a timer (its pod killed mid-wait), a tool answered over NATS, the item completed; labels at each step', async () => {
    const base = `http://llm-life.${NS}.svc:8080/v1`;
    await kubectl(['apply', '-f', '-'], llmServer(LIVING_SCRIPT, 'llm-life'));
    await kubectl(['apply', '-f', '-'], livingManifests(base));
    await kubectl(['apply', '-f', '-'], toolService('living', 'lookup'));
    await waitHoltReady('living', 1);
    await kubectl(['rollout', 'status', 'deploy/llm-life', '--timeout=180s']);
    await kubectl(['rollout', 'status', 'deploy/builds', '--timeout=180s']);
    const secret = async (name: string) => {
      const d = await getJson<{ data: Record<string, string> }>(['secret', name]);
      return Buffer.from(d?.data.token ?? '', 'base64').toString('utf8');
    };
    const ci = await eventually(
      'the ci token',
      async () => (await secret('living-watcher-ingress-ci')) || undefined,
      CLUSTER_WAIT,
    );
    const ops = await secret('living-watcher-ingress-ops');
    const send = async (key: string, body: string, token = ci): Promise<number> => {
      if (!c.local) {
        // Another cluster: the CLI's way in (the API server's port-forward to the orchestrator).
        await holt('living', ['send', 'Watcher', JSON.parse(body).text, '--token', token, '--key', key]);
        return 202;
      }
      // An outside client: curl from a node's network namespace to the orchestrator's ingress port.
      const orch = (await pods('holt.io/instance=living,app.kubernetes.io/component=orchestrator')).find(
        (p) => p.status.phase === 'Running',
      ) as (Pod & { status: { podIP?: string } }) | undefined;
      const stdout = await onNode('curl', [
        '-sS',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        '-X',
        'POST',
        '-H',
        `Authorization: Bearer ${token}`,
        '-H',
        `Idempotency-Key: ${key}`,
        '-H',
        'Content-Type: application/json',
        '--data',
        body,
        `http://${orch?.status.podIP}:8090/v1/agents/Watcher/messages`,
      ]);
      return Number(stdout);
    };
    // The orchestrator may have started before its token file existed: the kubelet brings it (≤ a minute).
    await eventually(
      'the message queued (202)',
      async () =>
        (await send('build-7', JSON.stringify({ text: 'Build 7 started; tell us how it ends.' }))) === 202
          ? true
          : undefined,
      CLUSTER_WAIT,
    );
    if (c.local) expect(await send('build-7', JSON.stringify({ text: 'again' }))).toBe(200);
    type AgentSt = {
      status?: {
        life?: { state: string; items: { waiting: number; completed: number }; lastMessageTime?: string };
        ingress?: { tokens: { name: string; present: boolean }[] };
      };
    };
    const watcher = () => getJson<AgentSt>(['agent', 'living-watcher']);
    // Asleep on its timer: its pod is killed (no grace), and a new one takes over the wait.
    await eventually(
      'the item waits on its timer',
      async () => (((await watcher())?.status?.life?.items.waiting ?? 0) === 1 ? true : undefined),
      CLUSTER_WAIT,
    );
    const [first] = await pods('holt.io/instance=living,holt.io/role=Watcher');
    await kubectl(['delete', 'pod', first!.metadata.name, '--grace-period=0', '--force']);
    const done = await eventually(
      'the item completed',
      async () => {
        const w = await watcher();
        return (w?.status?.life?.items.completed ?? 0) === 1 ? w : undefined;
      },
      { ...CLUSTER_WAIT, timeoutMs: 420_000 },
    );
    expect(done.status?.life?.state).toBe('running');
    expect(done.status?.life?.lastMessageTime).toBeTruthy();
    expect(done.status?.ingress?.tokens).toEqual([
      { name: 'ci', secretName: 'living-watcher-ingress-ci', present: true },
      { name: 'ops', secretName: 'living-watcher-ingress-ops', present: true },
    ]);
    const after = await pods('holt.io/instance=living,holt.io/role=Watcher');
    expect(after.map((p) => p.metadata.name)).not.toContain(first!.metadata.name);
    // The operator's token: an instruction, through the CLI's way in.
    await holt('living', ['send', 'Watcher', 'Stand down for today.', '--token', ops]);
    // What the model was shown, in order (the scripted server logs each request).
    const shown = await eventually(
      'six model calls',
      async () => {
        const lines = (await kubectl(['logs', 'deploy/llm-life']))
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { user: string; last: string });
        return lines.length >= 6 ? lines : undefined;
      },
      CLUSTER_WAIT,
    );
    expect(shown[0]!.user).toContain(
      '<message origin="webhook" surface="POST /v1/agents/Watcher/messages" admission="token ci" authority="external_evidence"',
    );
    expect(shown[2]!.user).toContain('origin="timer"');
    // The tool's requests are per instance (cmd.tool.<holt>.<tool>); its answer came on the call's own reply subject.
    expect(shown[3]!.last).toContain(
      'origin="task" surface="cmd.tool.living.lookup" admission="tool service"',
    );
    expect(shown[3]!.last).toContain('build 7: green');
    expect(shown[5]!.user).toContain('origin="operator"');
    expect(shown[5]!.user).toContain('authority="operator_instruction"');
    const answered = await kubectl(['logs', 'deploy/builds']);
    expect(answered).toContain('"tool":"lookup","build":"7"');
    // The exposure asked for: an Ingress in front of the ingress port.
    const ing = await getJson<{ spec: { rules: { host: string }[] } }>(['ingress', 'living-ingress']);
    expect(ing?.spec.rules[0]?.host).toBe('agents.example.test');
    // The console with --kube shows it on the living agents page, read from the Holt's Postgres.
    const served = spawn(join(ROOT, 'bin', 'holt'), ['--kube', `${NS}/living`, 'console'], {
      env: { ...process.env, KUBECONFIG: c.kubeconfigPath, NO_COLOR: '1' },
    });
    try {
      const url = await consoleLink(served);
      const signIn = await fetch(url, { redirect: 'manual' });
      const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0]!;
      const living = await eventually(
        'the living agents page',
        async () => {
          const r = (await (await fetch(new URL('/api/living', url), { headers: { cookie } })).json()) as {
            enabled?: boolean;
            living: { role: string; items: { state: string; report: string | null }[] }[];
          };
          return r.living.length ? r : undefined;
        },
        CLUSTER_WAIT,
      );
      const w = living.living.find((a) => a.role === 'Watcher');
      expect(w?.items).toContainEqual(
        expect.objectContaining({ state: 'completed', report: 'Build 7 is green: 212/212 tests passed.' }),
      );
    } finally {
      served.kill('SIGTERM');
    }
  }, 900_000);
}
