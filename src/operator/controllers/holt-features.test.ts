import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { monitoringCrds } from '../../../test/harness/monitoring.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { hashToken } from '../../access/tokens.ts';
import type { KubeObject } from '../kube/kube.ts';
import {
  admin,
  agent,
  cond,
  get,
  holt,
  kube,
  NS,
  podOf,
  statusOf,
  useHoltControllerEnv,
} from './holt.testkit.ts';

useHoltControllerEnv();

describe("Holt reconciler: living agents' ingress and asynchronous NATS tools, on a real API server", () => {
  it("spec.ingress: token Secrets made (a user's own read), their hashes for the orchestrator, the port served, admitted and exposed; a deleted token is replaced; off again, all gone", async () => {
    await admin.create(
      holt('open', {
        llm: { model: 'm', apiKeySecretRef: { name: 'llm', key: 'key' } },
        ingress: { expose: 'Ingress', host: 'agents.example.test', className: 'nginx' },
      }),
    );
    await admin.create(
      agent('open-writer', {
        holt: 'open',
        role: 'Writer',
        llm: {},
        bidding: { strategy: 'exclusive' },
        ingress: {
          enabled: true,
          tokens: [
            { name: 'ci' },
            {
              name: 'ops',
              origin: 'operator',
              modes: ['enqueue_message'],
              maxPriority: 9,
              callbacks: [{ name: 'pager', url: 'https://pager.example/hooks/holt' }],
            },
            { name: 'byo', secretName: 'my-token' },
          ],
          rateLimitPerMinute: 30,
        },
      }),
    );
    const secretText = (o: KubeObject | undefined, key: string) =>
      Buffer.from((o as { data?: Record<string, string> } | undefined)?.data?.[key] ?? '', 'base64').toString(
        'utf8',
      );
    const fileOf = async () => {
      const f = secretText(await get('Secret', 'open-ingress-tokens'), 'tokens.json');
      return f
        ? (JSON.parse(f) as {
            tokens: {
              name: string;
              role: string;
              sha256: string;
              modes: string[];
              origin: string;
              ratePerMinute: number;
            }[];
          })
        : undefined;
    };
    const file = await eventually('the hashed token file', async () => {
      const f = await fileOf();
      return f?.tokens.length === 2 ? f : undefined;
    });
    const ci = secretText(await get('Secret', 'open-writer-ingress-ci'), 'token');
    expect(ci).toMatch(/^holt_/);
    expect((await get('Secret', 'open-writer-ingress-ci'))?.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'Agent',
      name: 'open-writer',
    });
    expect(file.tokens).toEqual([
      {
        name: 'ci',
        role: 'Writer',
        sha256: hashToken(ci),
        modes: ['enqueue_message', 'wake_hint'],
        origin: 'webhook',
        ratePerMinute: 30,
        maxPriority: 0,
        callbacks: [],
        createdAtMs: 0,
      },
      // A token's priority and callbacks reach the orchestrator with its hash.
      expect.objectContaining({
        name: 'ops',
        modes: ['enqueue_message'],
        origin: 'operator',
        maxPriority: 9,
        callbacks: [{ name: 'pager', url: 'https://pager.example/hooks/holt' }],
      }),
    ]);
    // The token file holds no token.
    expect(JSON.stringify(file)).not.toContain(ci);
    const dep = await eventually('the orchestrator serves the ingress', async () => {
      const d = await get('Deployment', 'open-orchestrator');
      const env = (podOf(d)?.spec.containers[0]?.env ?? []) as { name: string; value?: string }[];
      return env.some((e) => e.name === 'HOLT_INGRESS_PORT' && e.value === '8090') ? d : undefined;
    });
    const c0 = podOf(dep).spec.containers[0] as {
      env: { name: string; value?: string }[];
      ports: unknown[];
      volumeMounts: unknown[];
    };
    expect(c0.env).toContainEqual({
      name: 'HOLT_INGRESS_TOKENS_FILE',
      value: '/etc/holt/ingress/tokens.json',
    });
    expect(c0.ports).toContainEqual(expect.objectContaining({ name: 'ingress', containerPort: 8090 }));
    expect(c0.volumeMounts).toContainEqual(
      expect.objectContaining({ name: 'ingress-tokens', mountPath: '/etc/holt/ingress', readOnly: true }),
    );
    expect(podOf(dep).spec.volumes).toContainEqual(
      expect.objectContaining({
        name: 'ingress-tokens',
        secret: expect.objectContaining({ secretName: 'open-ingress-tokens', optional: true }),
      }),
    );
    const svc = await eventually('the Service with its ingress port', async () => {
      const o = await get('Service', 'open-orchestrator');
      return JSON.stringify(o?.spec ?? {}).includes('"ingress"') ? o : undefined;
    });
    expect(svc.spec).toMatchObject({
      ports: expect.arrayContaining([
        expect.objectContaining({ name: 'ingress', port: 8090, targetPort: 'ingress' }),
      ]),
    });
    const np = await eventually('the ingress NetworkPolicy', () => get('NetworkPolicy', 'open-ingress'));
    expect(np.spec).toMatchObject({
      podSelector: {
        matchLabels: { 'holt.io/instance': 'open', 'app.kubernetes.io/component': 'orchestrator' },
      },
      ingress: [{ ports: [{ protocol: 'TCP', port: 8090 }] }],
    });
    const ing = await eventually('the Ingress', () => get('Ingress', 'open-ingress'));
    expect(ing.spec).toMatchObject({
      ingressClassName: 'nginx',
      rules: [
        {
          host: 'agents.example.test',
          http: {
            paths: ['/v1/agents', '/a2a'].map((path) => ({
              path,
              pathType: 'Prefix',
              backend: { service: { name: 'open-orchestrator', port: { name: 'ingress' } } },
            })),
          },
        },
      ],
    });
    // The user's own Secret arrives: its token is admitted too (the reconcile re-reads tokens on its poll).
    const st = await eventually('the Agent reports its tokens', async () => {
      const s = ((await get('Agent', 'open-writer'))?.status ?? {}) as {
        ingress?: { tokens: { name: string; present: boolean }[] };
      };
      // The Agent may report before the Holt's reconcile has made the Secrets: until both made ones show.
      return s.ingress?.tokens.filter((t) => t.present).length === 2 ? s.ingress : undefined;
    });
    expect(st.tokens).toEqual([
      { name: 'ci', secretName: 'open-writer-ingress-ci', present: true },
      { name: 'ops', secretName: 'open-writer-ingress-ops', present: true },
      { name: 'byo', secretName: 'my-token', present: false },
    ]);
    await admin.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'my-token', namespace: NS },
      stringData: { token: 'holt_my-own-token-0123456789' },
    } as KubeObject);
    await eventually('the user token admitted', async () =>
      (await fileOf())?.tokens.some(
        (t) => t.name === 'byo' && t.sha256 === hashToken('holt_my-own-token-0123456789'),
      )
        ? true
        : undefined,
    );
    // Deleting a made token's Secret revokes it: a new token replaces it.
    await admin.delete('Secret', NS, 'open-writer-ingress-ci');
    await eventually('a new ci token', async () => {
      const t = (await fileOf())?.tokens.find((x) => x.name === 'ci');
      return t && t.sha256 !== hashToken(ci) ? true : undefined;
    });
    // Gateway without the Gateway API: a condition, never Degraded; the Ingress goes.
    await admin.mergePatch('Holt', NS, 'open', {
      spec: { ingress: { expose: 'Gateway', gateway: { name: 'public' } } },
    });
    const gw = await eventually('IngressExposed=False', async () => {
      const o = await get('Holt', 'open');
      return cond(o, 'IngressExposed')?.status === 'False' ? o : undefined;
    });
    expect(cond(gw, 'IngressExposed')?.reason).toBe('GatewayApiMissing');
    expect(cond(gw, 'Degraded')?.status).toBe('False');
    // Off: the tokens' file, the port and its policy go (the made token Secrets go with their Agent).
    await admin.mergePatch('Agent', NS, 'open-writer', { spec: { ingress: { enabled: false } } });
    await eventually('the ingress removed', async () =>
      !(await get('Secret', 'open-ingress-tokens')) && !(await get('NetworkPolicy', 'open-ingress'))
        ? true
        : undefined,
    );
    const after = await eventually('the orchestrator without ingress', async () => {
      const d = await get('Deployment', 'open-orchestrator');
      const env = (podOf(d)?.spec.containers[0]?.env ?? []) as { name: string }[];
      return env.some((e) => e.name === 'HOLT_INGRESS_PORT') ? undefined : d;
    });
    expect(podOf(after).spec.volumes.map((v) => v.name)).not.toContain('ingress-tokens');
    await admin.delete('Agent', NS, 'open-writer');
    await admin.delete('Holt', NS, 'open');
  });

  it('spec.ingress.console: its token Secrets made by the Holt, their hashes in the file, the orchestrator told, /console exposed; off again, all gone', async () => {
    await admin.create(
      holt('seen', {
        llm: { model: 'm', apiKeySecretRef: { name: 'llm', key: 'key' } },
        ingress: {
          expose: 'Ingress',
          host: 'console.example.test',
          console: {
            enabled: true,
            tracesUrl: 'https://jaeger.example.test/',
            tokens: [{ name: 'operator', access: 'act' }, { name: 'viewer' }],
          },
        },
      }),
    );
    const text = (o: KubeObject | undefined, key: string) =>
      Buffer.from((o as { data?: Record<string, string> } | undefined)?.data?.[key] ?? '', 'base64').toString(
        'utf8',
      );
    const file = await eventually('the console tokens in the file', async () => {
      const f = text(await get('Secret', 'seen-ingress-tokens'), 'tokens.json');
      const parsed = f ? (JSON.parse(f) as { tokens: unknown[]; console?: { name: string }[] }) : undefined;
      return parsed?.console?.length === 2 ? parsed : undefined;
    });
    const operator = await get('Secret', 'seen-console-operator');
    expect(text(operator, 'token')).toMatch(/^holt_/);
    expect(operator?.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Holt', name: 'seen' });
    expect(file).toEqual({
      tokens: [],
      console: [
        { name: 'operator', sha256: hashToken(text(operator, 'token')), access: 'act', createdAtMs: 0 },
        {
          name: 'viewer',
          sha256: hashToken(text(await get('Secret', 'seen-console-viewer'), 'token')),
          access: 'read',
          createdAtMs: 0,
        },
      ],
    });
    const dep = await eventually('the orchestrator serves the console', async () => {
      const d = await get('Deployment', 'seen-orchestrator');
      const env = (podOf(d)?.spec.containers[0]?.env ?? []) as { name: string }[];
      return env.some((e) => e.name === 'HOLT_CONSOLE') ? d : undefined;
    });
    expect(podOf(dep).spec.containers[0]?.env).toEqual(
      expect.arrayContaining([
        { name: 'HOLT_INGRESS_PORT', value: '8090' },
        { name: 'HOLT_CONSOLE', value: 'true' },
        { name: 'HOLT_CONSOLE_TRACES_URL', value: 'https://jaeger.example.test/' },
      ]),
    );
    const ing = await eventually('the Ingress', () => get('Ingress', 'seen-ingress'));
    expect(
      (ing.spec as { rules: { http: { paths: { path: string }[] } }[] }).rules[0]?.http.paths.map(
        (x) => x.path,
      ),
    ).toEqual(['/v1/agents', '/a2a', '/console']);
    await eventually('the ingress NetworkPolicy', () => get('NetworkPolicy', 'seen-ingress'));
    // Off: no Agent has ingress, so the port, its file, policy and Ingress go.
    await admin.mergePatch('Holt', NS, 'seen', { spec: { ingress: { console: { enabled: false } } } });
    await eventually('the console removed', async () =>
      !(await get('Secret', 'seen-ingress-tokens')) &&
      !(await get('NetworkPolicy', 'seen-ingress')) &&
      !(await get('Ingress', 'seen-ingress'))
        ? true
        : undefined,
    );
    await eventually('the orchestrator without the console', async () => {
      const env = (podOf(await get('Deployment', 'seen-orchestrator'))?.spec.containers[0]?.env ?? []) as {
        name: string;
      }[];
      return env.some((e) => e.name === 'HOLT_CONSOLE' || e.name === 'HOLT_INGRESS_PORT') ? undefined : true;
    });
    await admin.delete('Holt', NS, 'seen');
  });

  it('asynchronous NATS tools: a Secret per tool (user, HMAC password, URL) read by the bundled NATS; the same set changes nothing; a dropped tool leaves the NATS pod template and loses its Secret', async () => {
    const text = (o: KubeObject | undefined, key: string) =>
      Buffer.from((o as { data?: Record<string, string> } | undefined)?.data?.[key] ?? '', 'base64').toString(
        'utf8',
      );
    const natsEnv = async () =>
      (
        (
          podOf(await get('StatefulSet', 'tooled-nats')).spec.containers[0] as {
            env: { name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
          }
        ).env ?? []
      ).filter((e) => /^HOLT_TOOL_\d+_PASSWORD$/.test(e.name));
    await admin.create(holt('tooled', { llm: { model: 'm', apiKeySecretRef: { name: 'llm', key: 'key' } } }));
    const tools = (names: string[]) => [
      ...names.map((name) => ({ name, description: name, async: 'nats' })),
      { name: 'local', description: 'not asynchronous', argv: ['true'] },
    ];
    await admin.create(
      agent('tooled-a', {
        holt: 'tooled',
        bidding: { strategy: 'exclusive' },
        llm: { life: true, tools: tools(['lookup']) },
      }),
    );
    await admin.create(
      agent('tooled-b', {
        holt: 'tooled',
        bidding: { strategy: 'exclusive' },
        llm: { life: true, tools: tools(['lookup', 'Deploy_it']) },
      }),
    );
    const deploySecret = await eventually('the Deploy_it Secret', async () =>
      (await get('StatefulSet', 'tooled-nats'))
        ? (await natsEnv()).find((e) => e.valueFrom?.secretKeyRef?.name.startsWith('tooled-tool-deploy-it-'))
            ?.valueFrom?.secretKeyRef?.name
        : undefined,
    );
    const toolPw = text(await get('Secret', 'tooled-nats'), 'tool-password');
    expect(toolPw.length).toBeGreaterThanOrEqual(16);
    const lookup = await get('Secret', 'tooled-tool-lookup');
    expect(text(lookup, 'user')).toBe('tool-lookup');
    expect(text(lookup, 'password')).toBe(createHmac('sha256', toolPw).update('tool:lookup').digest('hex'));
    expect(text(lookup, 'url')).toBe(
      `nats://tool-lookup:${text(lookup, 'password')}@tooled-nats.${NS}.svc:4222`,
    );
    expect(text(lookup, 'subject')).toBe('cmd.tool.tooled.lookup');
    expect(lookup?.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Holt', name: 'tooled' });
    const deploy = await get('Secret', deploySecret);
    expect(text(deploy, 'user')).toBe('tool-Deploy_it');
    expect(text(deploy, 'password')).toBe(
      createHmac('sha256', toolPw).update('tool:Deploy_it').digest('hex'),
    );
    // The NATS reads each tool's password from its Secret; the non-asynchronous tool has none.
    expect((await natsEnv()).map((e) => e.valueFrom?.secretKeyRef)).toEqual([
      { name: deploySecret, key: 'password' },
      { name: 'tooled-tool-lookup', key: 'password' },
    ]);
    expect(await get('Secret', 'tooled-tool-local')).toBeUndefined();
    // A tampered password is set back (level-triggered; Secrets have no informer, so a Holt event).
    await admin.mergePatch('Secret', NS, 'tooled-tool-lookup', { stringData: { password: 'guessed' } });
    await admin.mergePatch('Holt', NS, 'tooled', { metadata: { annotations: { poke: '1' } } });
    await eventually('the password restored', async () =>
      text(await get('Secret', 'tooled-tool-lookup'), 'password') === text(lookup, 'password')
        ? true
        : undefined,
    );
    // The same set again (another Agent declaring lookup): once the Holt has counted it, neither the
    // NATS StatefulSet nor a tool Secret was written.
    // The StatefulSet by generation (its spec): a controller's status write changes its resourceVersion.
    const rv = async () =>
      [
        (await get('StatefulSet', 'tooled-nats'))?.metadata.generation,
        (await get('Secret', 'tooled-tool-lookup'))?.metadata.resourceVersion,
        (await get('Secret', deploySecret))?.metadata.resourceVersion,
      ].join();
    const before = await rv();
    await admin.create(
      agent('tooled-c', {
        holt: 'tooled',
        bidding: { strategy: 'exclusive' },
        llm: { life: true, tools: tools(['lookup']) },
      }),
    );
    await eventually('the Holt counts three agents', async () =>
      (statusOf(await get('Holt', 'tooled')) as { agents?: { total: number } }).agents?.total === 3
        ? true
        : undefined,
    );
    expect(await rv()).toBe(before);
    // Deploy_it dropped: the NATS no longer has its user, and its Secret goes.
    await admin.delete('Agent', NS, 'tooled-b');
    await eventually('the NATS without Deploy_it', async () =>
      (await natsEnv()).length === 1 ? true : undefined,
    );
    await eventually('its Secret deleted', async () =>
      (await get('Secret', deploySecret)) ? undefined : true,
    );
    expect(text(await get('Secret', 'tooled-tool-lookup'), 'user')).toBe('tool-lookup');
  });
  it('spec.monitoring.podMonitor: without the Prometheus Operator a condition and a Warning (never Degraded); with its CRD a PodMonitor; off again, gone', async () => {
    await admin.create(
      holt('scraped', { monitoring: { podMonitor: true, labels: { release: 'prometheus' } } }),
    );
    const missing = await eventually('MonitoringReady=False', async () => {
      const o = await get('Holt', 'scraped');
      return cond(o, 'MonitoringReady')?.status === 'False' ? o : undefined;
    });
    expect(cond(missing, 'MonitoringReady')?.reason).toBe('PrometheusOperatorMissing');
    expect(cond(missing, 'Degraded')?.status).toBe('False');
    const warned = (await admin.list('Event', NS)).items.filter(
      (e) =>
        e.reason === 'PrometheusOperatorMissing' &&
        (e as { regarding?: { name?: string } }).regarding?.name === 'scraped',
    );
    expect(warned.length).toBe(1);
    // The Prometheus Operator arrives: its PodMonitor CRD, as its release ships it.
    const crd = (await monitoringCrds()).find((f) => f.endsWith('podmonitors.yaml'));
    await kube.kubectl(['apply', '--server-side', '-f', crd as string]);
    const pm = await eventually('the PodMonitor', () => get('PodMonitor', 'scraped-pods'), {
      timeoutMs: 60_000,
    });
    expect(pm.metadata.labels?.release).toBe('prometheus');
    expect(pm.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Holt', name: 'scraped' });
    expect(pm.spec).toMatchObject({
      selector: { matchLabels: { 'holt.io/instance': 'scraped' } },
      podTargetLabels: ['holt.io/instance', 'holt.io/role'],
      podMetricsEndpoints: [{ port: 'http', path: '/metrics', interval: '30s' }],
    });
    await eventually('MonitoringReady=True', async () =>
      cond(await get('Holt', 'scraped'), 'MonitoringReady')?.status === 'True' ? true : undefined,
    );
    await admin.mergePatch('Holt', NS, 'scraped', { spec: { monitoring: { podMonitor: false } } });
    await eventually('PodMonitor deleted', async () =>
      (await get('PodMonitor', 'scraped-pods')) ? undefined : true,
    );
    await admin.delete('Holt', NS, 'scraped');
  });
});
