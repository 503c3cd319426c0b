import { expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { A2A_NS, CLUSTER_WAIT, c, holtIn, kubectl, NS, onNode, progress } from '../ctx.ts';
import { llmServer } from '../fixtures.ts';
import { A2A_SCRIPT, a2aManifests } from '../manifests.ts';

/** The real cluster: two Holts in two namespaces talk A2A through beta's ingress (issue 34). */
export function a2aTests(): void {
  it("two Holts talk A2A: alpha's agent calls beta's agent as an asynchronous tool, across namespaces, admitted by exactly the NetworkPolicies it needs", async () => {
    const { alpha, beta } = A2A_NS;
    const inNs = (ns: string, args: string[], input?: string) => c.kubectl(['-n', ns, ...args], { input });
    await kubectl(['apply', '-f', '-'], llmServer(A2A_SCRIPT, 'llm-a2a'));
    const docs = a2aManifests(A2A_NS, `http://llm-a2a.${NS}.svc:8080/v1`);
    await inNs(beta, ['apply', '-f', '-'], docs.beta);
    await kubectl(['rollout', 'status', 'deploy/llm-a2a', '--timeout=180s']);
    // beta's token for alpha (the operator made it), given to alpha's namespace as a Secret of its own.
    const token = await eventually(
      "beta's token for alpha",
      async () => {
        const r = await c.kubectlResult(
          ['-n', beta, 'get', 'secret', 'beta-reporter-ingress-alpha', '-o', 'jsonpath={.data.token}'],
          { allowFail: true },
        );
        return r.code === 0 && r.stdout ? Buffer.from(r.stdout, 'base64').toString('utf8') : undefined;
      },
      CLUSTER_WAIT,
    );
    await inNs(alpha, [
      'create',
      'secret',
      'generic',
      'beta-reporter-token',
      `--from-literal=token=${token}`,
    ]);
    await inNs(alpha, ['apply', '-f', '-'], docs.alpha);
    for (const [ns, name] of [
      [beta, 'beta'],
      [alpha, 'alpha'],
    ] as const)
      await eventually(
        `Holt ${name} Ready`,
        async () =>
          (
            await c.kubectlResult(
              ['-n', ns, 'wait', '--for=condition=Ready', `holt/${name}`, '--timeout=100s'],
              {
                allowFail: true,
              },
            )
          ).code === 0 || undefined,
        { ...CLUSTER_WAIT, timeoutMs: 420_000 },
      );
    // Exactly what is needed: Asker's egress opens the model server and beta's orchestrator (its ingress
    // port), nothing of beta's stores; beta's ingress port admits pods of other namespaces.
    const egress = JSON.parse(await inNs(alpha, ['get', 'networkpolicy', '-o', 'json'])) as {
      items: {
        metadata: { name: string };
        spec: {
          egress?: {
            to?: { namespaceSelector?: unknown; podSelector?: { matchLabels?: Record<string, string> } }[];
            ports?: { port: number }[];
          }[];
        };
      }[];
    };
    const peers = egress.items.flatMap((p) => (p.spec.egress ?? []).flatMap((e) => e.to ?? []));
    expect(
      peers.some(
        (t) =>
          t.podSelector?.matchLabels?.['app.kubernetes.io/component'] === 'orchestrator' &&
          t.podSelector.matchLabels['holt.io/instance'] === 'beta',
      ),
    ).toBe(true);
    expect(
      peers.some(
        (t) =>
          t.podSelector?.matchLabels?.['holt.io/instance'] === 'beta' &&
          t.podSelector.matchLabels['app.kubernetes.io/component'] !== 'orchestrator',
      ),
    ).toBe(false);
    progress('a2a: both Holts Ready; asking alpha');
    const ops = Buffer.from(
      (
        await inNs(alpha, ['get', 'secret', 'alpha-asker-ingress-ops', '-o', 'jsonpath={.data.token}'])
      ).trim(),
      'base64',
    ).toString('utf8');
    const sent = await holtIn(alpha, 'alpha', ['send', 'Asker', 'Find out how build 9 did.', '--token', ops]);
    expect(sent.code).toBe(0);
    const shown = await eventually(
      'three model calls',
      async () => {
        const lines = (await kubectl(['logs', 'deploy/llm-a2a']))
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { model: string; user: string; last: string });
        return lines.length >= 3 ? lines : undefined;
      },
      { ...CLUSTER_WAIT, timeoutMs: 420_000 },
    );
    expect(shown.map((l) => l.model)).toEqual(['scripted-asker', 'scripted-reporter', 'scripted-asker']);
    // beta's agent got alpha's question over A2A, labelled with the token alpha holds.
    expect(shown[1]!.user).toContain('origin="a2a"');
    expect(shown[1]!.user).toContain('admission="token alpha"');
    expect(shown[1]!.user).toContain('How did build 9 do?');
    // alpha's resumed turn got the answer as the call's result.
    expect(shown[2]!.last).toContain('Build 9 is green: 300/300 tests passed.');
    expect(shown[2]!.last).toContain(`surface="A2A http://beta-orchestrator.${beta}.svc:8090/a2a/Reporter"`);
    expect(JSON.stringify(shown)).not.toContain(token);
    if (c.local) await betaConsole(inNs);
  }, 900_000);
}

/**
 * beta's console, served by its orchestrator at /console of the ingress port (issue 35): from a node's
 * network namespace, the sign-in page, a sign-in with the operator-made console token, and the living
 * agents page showing Reporter and the A2A message it got.
 */
async function betaConsole(inNs: (ns: string, args: string[]) => Promise<string>): Promise<void> {
  const { beta } = A2A_NS;
  progress("a2a: beta's console");
  const consoleToken = Buffer.from(
    (await inNs(beta, ['get', 'secret', 'beta-console-operator', '-o', 'jsonpath={.data.token}'])).trim(),
    'base64',
  ).toString('utf8');
  const ip = (
    await inNs(beta, [
      'get',
      'pods',
      '-l',
      'holt.io/instance=beta,app.kubernetes.io/component=orchestrator',
      '--field-selector=status.phase=Running',
      '-o',
      'jsonpath={.items[0].status.podIP}',
    ])
  ).trim();
  const base = `http://${ip}:8090/console`;
  const curl = (args: string[]) => onNode('curl', ['-sS', ...args]);
  expect(await curl([`${base}/`])).toContain('name="token"');
  // The orchestrator may have started before its token file had the console's token: the kubelet brings it.
  const cookie = await eventually(
    'signed in to the console',
    async () => {
      const head = await curl([
        '-o',
        '/dev/null',
        '-D',
        '-',
        '--data-urlencode',
        `token=${consoleToken}`,
        `${base}/sign-in`,
      ]);
      return /^HTTP\/1\.1 303/.test(head) ? /set-cookie: (holt_console=[^;]+)/i.exec(head)?.[1] : undefined;
    },
    CLUSTER_WAIT,
  );
  const living = JSON.parse(await curl(['-H', `Cookie: ${cookie}`, `${base}/api/living`])) as {
    living: { role: string; messages: { labels: { origin: string } }[] }[];
  };
  const reporter = living.living.find((a) => a.role === 'Reporter');
  expect(reporter?.messages.map((m) => m.labels.origin)).toContain('a2a');
  expect(await curl(['-o', '/dev/null', '-w', '%{http_code}', `${base}/api/living`])).toBe('401');
}
