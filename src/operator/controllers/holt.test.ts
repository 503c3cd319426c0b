import { describe, expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { Blackboard } from '../../blackboard/client.ts';
import { getAgents } from '../../blackboard/registry.ts';
import { fakeKubelet, writesOnResync } from '../testkit.ts';
import { REGISTRY_FINALIZER } from './agent.ts';
import {
  admin,
  agent,
  cond,
  get,
  holt,
  kube,
  NS,
  op,
  podOf,
  RUNTIME,
  redis,
  restartOperator,
  statusOf,
  unreachable,
  useHoltControllerEnv,
} from './holt.testkit.ts';

useHoltControllerEnv();

describe('Holt and Agent reconcilers on a real API server', () => {
  let holtUid: string;

  it('create: stores, orchestrator, migration, accounts, policies, all owned, with the restricted profile', async () => {
    const created = await admin.create(
      holt('demo', { llm: { model: 'm', apiKeySecretRef: { name: 'llm', key: 'key' } } }),
    );
    holtUid = created.metadata.uid ?? '';
    await admin.create(
      agent('demo-coder', {
        holt: 'demo',
        role: 'coder',
        command: ['/app/run.sh'],
        bidding: { strategy: 'exclusive' },
        workspace: { mode: 'rw' },
        egress: true,
      }),
    );
    for (const [kind, name] of [
      ['StatefulSet', 'demo-redis'],
      ['StatefulSet', 'demo-nats'],
      ['StatefulSet', 'demo-postgres'],
      ['Service', 'demo-redis'],
      ['Service', 'demo-nats-hl'],
      ['PodDisruptionBudget', 'demo-postgres'],
      ['Secret', 'demo-redis'],
      ['Secret', 'demo-nats'],
      ['Secret', 'demo-postgres-app'],
      ['ServiceAccount', 'demo-orchestrator'],
      ['ServiceAccount', 'demo-agent'],
      ['PersistentVolumeClaim', 'demo-workspace'],
      ['NetworkPolicy', 'demo-default-deny'],
      ['NetworkPolicy', 'demo-dns'],
      ['NetworkPolicy', 'demo-redis-ingress'],
      ['Deployment', 'demo-orchestrator'],
    ] as const) {
      const o = await eventually(`${kind}/${name}`, () => get(kind, name));
      expect(o.metadata.ownerReferences?.[0]).toMatchObject({
        kind: 'Holt',
        name: 'demo',
        uid: holtUid,
        controller: true,
      });
      expect(o.metadata.labels).toMatchObject({
        'holt.io/instance': 'demo',
        'app.kubernetes.io/managed-by': 'holt-operator',
      });
    }
    const jobs = await eventually('the migration job', async () => {
      const l = await admin.list('Job', NS, { labelSelector: 'app.kubernetes.io/component=migration' });
      return l.items.length ? l.items : undefined;
    });
    expect(jobs[0]?.metadata.ownerReferences?.[0]?.uid).toBe(holtUid);
    // No TTL: a collected migration Job would be re-created (and the migrations re-run) by the next
    // reconcile; its name carries the image/database hash, so it stays as the record of that run.
    const mspec = jobs[0]?.spec as { ttlSecondsAfterFinished?: number } | undefined;
    expect(mspec).toBeDefined();
    expect(mspec?.ttlSecondsAfterFinished).toBeUndefined();

    const secret = await get('Secret', 'demo-postgres-app');
    const data = secret?.data as Record<string, string>;
    // CloudNativePG's -app keys (the superuser, for people), the migrations' owner, and a role per component.
    expect(Object.keys(data).sort()).toEqual([
      'dbname',
      'host',
      'operator-password',
      'operator-uri',
      'orchestrator-password',
      'orchestrator-uri',
      'owner-password',
      'owner-uri',
      'password',
      'port',
      'pup-password',
      'pup-uri',
      'uri',
      'user',
      'username',
    ]);
    for (const who of ['orchestrator', 'pup', 'operator'])
      expect(Buffer.from(data[`${who}-uri`] ?? '', 'base64').toString()).toMatch(
        new RegExp(
          `^postgresql://holt_${who}:${Buffer.from(data[`${who}-password`] ?? '', 'base64').toString()}@`,
        ),
      );
    expect(Buffer.from(data.password ?? '', 'base64').toString()).toMatch(/^[0-9a-f]{48}$/);

    const orch = podOf(await get('Deployment', 'demo-orchestrator'));
    const c = orch.spec.containers[0] as Record<string, Record<string, unknown>>;
    expect(c.image).toBe(RUNTIME);
    expect(c.livenessProbe?.httpGet).toMatchObject({ path: '/healthz' });
    expect(c.readinessProbe?.httpGet).toMatchObject({ path: '/readyz' });
    expect(c.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(orch.spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const env = c.env as unknown as {
      name: string;
      value?: string;
      valueFrom?: { secretKeyRef: { name: string; key: string } };
    }[];
    // The orchestrator's own users: never the admin's, never the superuser.
    expect(env.find((e) => e.name === 'REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'demo-redis',
      key: 'orchestrator-url',
    });
    expect(env.find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'demo-postgres-app',
      key: 'orchestrator-uri',
    });

    const redisSts = podOf(await get('StatefulSet', 'demo-redis'));
    expect((redisSts.spec.containers[0] as { image: string }).image).toBe('redis:7-alpine');
    expect(
      (
        podOf(await get('StatefulSet', 'demo-nats')).spec.containers[0] as {
          ports: { containerPort: number }[];
        }
      ).ports.map((p) => p.containerPort),
    ).toContain(8222);

    // The agent: one standard pup with the pup env, Secrets, workspace rw, egress label.
    const dep = await eventually('the agent deployment', () => get('Deployment', 'demo-coder'));
    expect(dep.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'Agent',
      name: 'demo-coder',
      controller: true,
    });
    const pod = podOf(dep);
    const pup = pod.spec.containers[0] as {
      env: { name: string; value?: string; valueFrom?: unknown }[];
      volumeMounts: { name: string; readOnly?: boolean }[];
      livenessProbe: { httpGet: { path: string } };
    };
    const penv = Object.fromEntries(pup.env.map((e) => [e.name, e.value ?? e.valueFrom]));
    expect(penv).toMatchObject({
      HOLT_INSTANCE_NAME: 'demo',
      HOLT_AGENT_NAME: 'coder',
      HOLT_AGENT_COMMAND: '["/app/run.sh"]',
      HOLT_BIDDING_STRATEGY: 'exclusive',
      NATS_URL: { secretKeyRef: { name: 'demo-nats', key: 'pup-url' } },
      HOLT_TOOL_RUNNER_SOCKET: '/run/holt-runner/runner.sock',
    });
    // The pup only reads the workspace; the agent container (tools, a native sidecar) writes it, and
    // holds no store or model credential.
    expect(pup.volumeMounts.find((m) => m.name === 'workspace')?.readOnly).toBe(true);
    type Side = typeof pup & { name: string; restartPolicy?: string };
    const tools = (pod.spec as unknown as { initContainers: Side[] }).initContainers.find(
      (c) => c.name === 'agent',
    );
    expect(tools?.restartPolicy).toBe('Always');
    expect(tools?.volumeMounts.find((m) => m.name === 'workspace')?.readOnly ?? false).toBe(false);
    const aenv = tools?.env.map((e) => e.name) ?? [];
    expect(aenv).toContain('HOLT_AGENT_NAME');
    for (const k of ['REDIS_URL', 'NATS_URL', 'DATABASE_URL', 'HOLT_LLM_API_KEY'])
      expect(aenv).not.toContain(k);
    expect(pup.livenessProbe.httpGet.path).toBe('/healthz');
    expect(
      (podOf(dep) as unknown as { metadata: { labels: Record<string, string> } }).metadata.labels,
    ).toMatchObject({ 'holt.io/role': 'coder', 'holt.io/egress': 'true' });
    // Its egress: what it declares (here nothing: the model endpoint's port, 443, anywhere outside),
    // never the metadata address or the cluster's own CIDRs (the API server, other pods).
    const egress = await eventually('the agent egress policy', () =>
      get('NetworkPolicy', 'demo-coder-egress'),
    );
    expect(egress.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Agent', name: 'demo-coder' });
    expect(egress.spec).toEqual({
      podSelector: {
        matchLabels: { 'holt.io/instance': 'demo', 'holt.io/role': 'coder', 'holt.io/egress': 'true' },
      },
      policyTypes: ['Egress'],
      egress: [
        {
          to: [
            {
              ipBlock: {
                cidr: '0.0.0.0/0',
                except: [
                  '169.254.0.0/16',
                  '100.100.100.200/32',
                  '10.0.0.0/8',
                  '172.16.0.0/12',
                  '192.168.0.0/16',
                ],
              },
            },
            { ipBlock: { cidr: '::/0', except: ['fe80::/10', 'fc00::/7'] } },
          ],
          ports: [{ protocol: 'TCP', port: 443 }],
        },
      ],
    });
    // The stores admit the operator from its own namespace only.
    const ingress = await get('NetworkPolicy', 'demo-redis-ingress');
    expect(JSON.stringify(ingress?.spec)).toContain('"kubernetes.io/metadata.name":"holt-system"');

    // Registry in Redis once the Redis pod is ready (a fake kubelet says so).
    const bb = Blackboard.connect(redis.url, 'demo');
    try {
      const reg = await eventually('the registry', async () => {
        await fakeKubelet(admin, NS, {
          labelSelector: 'holt.io/instance=demo,app.kubernetes.io/component=redis',
        });
        const r = await getAgents(bb);
        return r.agents.length ? r.agents : undefined;
      });
      expect(reg).toEqual([{ role: 'coder', kind: 'standard' }]);
    } finally {
      await bb.close();
    }
    // No finalizer: one would hang a namespace's deletion once the operator's RoleBinding there is gone.
    expect((await get('Agent', 'demo-coder'))?.metadata.finalizers ?? []).toEqual([]);

    // The Agent's reconcile may write the registry before the Holt's sees its Redis ready: the Holt's
    // status says so at its next reconcile.
    const h = await eventually('Holt status with the registry synced', async () => {
      const o = await get('Holt', 'demo');
      return statusOf(o).phase && cond(o, 'RegistrySynced')?.status === 'True' ? o : undefined;
    });
    expect(statusOf(h).phase).toBe('Progressing');
    expect(cond(h, 'Ready')).toMatchObject({ status: 'False', observedGeneration: 1 });
    expect(cond(h, 'Progressing')?.status).toBe('True');
    expect(cond(h, 'RegistrySynced')?.status).toBe('True');
  });

  // The status logic alone: no kubelet runs here, so a fake one writes the pods' Ready. That a real
  // Holt goes Progressing → Ready as real pods become ready: e2e/cluster/sections/jobs.ts.
  it('status logic: Ready, with MigrationsComplete and the agent counted, once the API server shows every pod ready (pods marked by a fake kubelet)', async () => {
    const h = await eventually(
      'the Holt and its agent Ready',
      async () => {
        await fakeKubelet(admin, NS);
        const o = await get('Holt', 'demo');
        const a = await get('Agent', 'demo-coder');
        return statusOf(o).phase === 'Ready' &&
          cond(a, 'Ready')?.status === 'True' &&
          statusOf(o) &&
          (o?.status as { agents?: { ready: number } } | undefined)?.agents?.ready === 1
          ? o
          : undefined;
      },
      { timeoutMs: 50_000 },
    ).catch(async (e) => {
      console.log(
        JSON.stringify((await get('Holt', 'demo'))?.status, null, 1),
        JSON.stringify((await get('Agent', 'demo-coder'))?.status),
      );
      throw e;
    });
    expect(cond(h, 'Ready')?.status).toBe('True');
    expect(cond(h, 'MigrationsComplete')?.status).toBe('True');
    expect(h.status).toMatchObject({
      agents: { total: 1, ready: 1 },
      endpoints: { redis: `demo-redis.${NS}.svc:6379` },
    });
  });

  it('steady state: a second reconcile of an unchanged spec sends no write', async () => {
    // Every reconciler (and, for pools, an autoscaler tick) runs again: nothing is written.
    expect(await writesOnResync(op)).toBe(0);
  });

  it('a conflicting write by someone else is undone, and their other fields are kept', async () => {
    await kube.kubectl(['-n', NS, 'set', 'image', 'deployment/demo-orchestrator', 'orchestrator=evil:1']);
    await kube.kubectl(['-n', NS, 'label', 'deployment/demo-orchestrator', 'team=blue']);
    const d = await eventually('the image restored', async () => {
      const o = await get('Deployment', 'demo-orchestrator');
      return (podOf(o).spec.containers[0] as { image: string }).image === RUNTIME ? o : undefined;
    });
    expect(d.metadata.labels?.team).toBe('blue');
  });

  it('an operator restart resumes without recreating or rewriting anything', async () => {
    await op.idle();
    const kinds = [
      'StatefulSet',
      'Service',
      'Secret',
      'Deployment',
      'Job',
      'NetworkPolicy',
      'ServiceAccount',
      'PodDisruptionBudget',
    ];
    const uids = async () => {
      const m = new Map<string, string>();
      for (const k of kinds)
        for (const o of (
          await admin.list(k, NS, { labelSelector: 'app.kubernetes.io/managed-by=holt-operator' })
        ).items)
          m.set(`${k}/${o.metadata.name}`, `${o.metadata.uid}@${o.metadata.resourceVersion}`);
      return m;
    };
    const before = await uids();
    await restartOperator();
    await op.settled();
    expect(op.ctx.client.writes()).toBe(0);
    expect(await uids()).toEqual(before);
  });

  it('update: spec changes reach the children; switching a store to external prunes the bundled one', async () => {
    await admin.mergePatch('Holt', NS, 'demo', {
      spec: {
        orchestrator: { replicas: 2, bidTimeoutSeconds: 12 },
        stores: { redis: { mode: 'external', url: 'redis://redis.example:6379' } },
      },
    });
    const d = await eventually('orchestrator updated', async () => {
      const o = await get('Deployment', 'demo-orchestrator');
      return (o?.spec as { replicas: number } | undefined)?.replicas === 2 ? o : undefined;
    });
    const env = (podOf(d).spec.containers[0] as { env: { name: string; value?: string }[] }).env;
    expect(env.find((e) => e.name === 'HOLT_BID_TIMEOUT_MS')?.value).toBe('12000');
    expect(env.find((e) => e.name === 'REDIS_URL')?.value).toBe('redis://redis.example:6379');
    await eventually('bundled redis pruned', async () =>
      (await get('StatefulSet', 'demo-redis')) ? undefined : true,
    );
    await eventually('its secret deleted', async () =>
      (await get('Secret', 'demo-redis')) ? undefined : true,
    );
    await eventually('the agent follows the Holt', async () => {
      const a = await get('Deployment', 'demo-coder');
      const e = (podOf(a).spec.containers[0] as { env: { name: string; value?: string }[] }).env;
      return e.find((x) => x.name === 'REDIS_URL')?.value === 'redis://redis.example:6379' ? true : undefined;
    });
    const h = await eventually('observedGeneration 2', async () => {
      const o = await get('Holt', 'demo');
      return statusOf(o).observedGeneration === 2 ? o : undefined;
    });
    expect(cond(h, 'RedisReady')?.reason).toBe('External');
  });

  it("an older operator's store Secrets get the per-principal keys; the keys they had stay as they were", async () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const str = (v: string | undefined) => Buffer.from(v ?? '', 'base64').toString();
    // What the operator made before each component had its own store user: one admin password.
    await admin.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'legacy-redis', namespace: NS },
      data: { password: b64('old-admin-pw'), url: b64('redis://:old-admin-pw@legacy-redis.x.svc:6379') },
    });
    await admin.create(holt('legacy'));
    const s = await eventually('the Secret upgraded', async () => {
      const o = await get('Secret', 'legacy-redis');
      return (o?.data as Record<string, string> | undefined)?.['pup-url'] ? o : undefined;
    });
    const data = s.data as Record<string, string>;
    expect(str(data.password)).toBe('old-admin-pw');
    // Its URL named no user (Redis's `default`, now off): it names the admin user now.
    expect(str(data.url)).toMatch(/^redis:\/\/admin:old-admin-pw@legacy-redis\./);
    for (const who of ['orchestrator', 'pup', 'operator']) {
      const pw = str(data[`${who}-password`]);
      expect(pw.length).toBeGreaterThanOrEqual(16);
      expect(str(data[`${who}-url`])).toContain(`:${pw}@`);
    }
    await admin.delete('Holt', NS, 'legacy');
  });

  it('an unreachable Redis gives Degraded + retry; the registry catches up when it is back', async () => {
    unreachable.add('lonely');
    await admin.create(holt('lonely'));
    await admin.create(
      agent('lonely-a', {
        holt: 'lonely',
        role: 'a',
        command: ['x'],
        bidding: { strategy: 'claim' },
        replicas: 3,
      }),
    );
    // While its Redis starts, the registry waits: Progressing, not Degraded.
    const starting = await eventually('waiting for Redis', async () => {
      const o = await get('Holt', 'lonely');
      return cond(o, 'RegistrySynced')?.reason === 'WaitingForRedis' ? o : undefined;
    });
    expect(cond(starting, 'Degraded')?.status).toBe('False');
    // Redis "ready" (its pod marked so) yet unreachable: that is Degraded, and retried.
    const h = await eventually('Degraded', async () => {
      await fakeKubelet(admin, NS, { labelSelector: 'holt.io/instance=lonely' });
      const o = await get('Holt', 'lonely');
      return cond(o, 'Degraded')?.status === 'True' ? o : undefined;
    });
    expect(cond(h, 'RegistrySynced')).toMatchObject({ status: 'False', reason: 'RedisUnavailable' });
    // Scalable agent: controller pup + an owned WorkerPool without spec.replicas.
    const pool = await eventually('the owned pool', () => get('WorkerPool', 'lonely-a-workers'));
    expect(pool.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Agent', name: 'lonely-a' });
    expect((pool.spec as { replicas?: number; target: string }).replicas).toBeUndefined();
    expect((pool.spec as { target: string }).target).toBe('a');
    unreachable.delete('lonely');
    await eventually(
      'registry synced',
      async () => {
        const o = await get('Holt', 'lonely');
        return cond(o, 'RegistrySynced')?.status === 'True' ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const bb = Blackboard.connect(redis.url, 'lonely');
    try {
      expect((await getAgents(bb)).agents).toEqual([
        { role: 'a', kind: 'scalable', worker_target: 'a', max_concurrent: 3 },
      ]);
    } finally {
      await bb.close();
    }
  });

  it('an Agent with the finalizer of an older operator loses it, and its deletion is not held', async () => {
    const a = await get('Agent', 'lonely-a');
    await admin.mergePatch('Agent', NS, 'lonely-a', {
      metadata: { finalizers: [REGISTRY_FINALIZER], resourceVersion: a?.metadata.resourceVersion },
    });
    await eventually('the old finalizer removed', async () =>
      (await get('Agent', 'lonely-a'))?.metadata.finalizers?.length ? undefined : true,
    );
  });

  it('delete: an Agent leaves the registry (the Holt rewrites it), a Holt takes its children with it (GC)', async () => {
    await admin.delete('Agent', NS, 'lonely-a');
    await eventually('agent gone', async () => ((await get('Agent', 'lonely-a')) ? undefined : true));
    const bb = Blackboard.connect(redis.url, 'lonely');
    try {
      await eventually('the registry without it', async () =>
        (await getAgents(bb)).agents.length === 0 ? true : undefined,
      );
    } finally {
      await bb.close();
    }
    await eventually('agent pool and deployment collected', async () =>
      (await get('WorkerPool', 'lonely-a-workers')) || (await get('Deployment', 'lonely-a'))
        ? undefined
        : true,
    );
    await admin.delete('Holt', NS, 'demo');
    await eventually(
      'children collected',
      async () => {
        const left = await Promise.all([
          get('StatefulSet', 'demo-nats'),
          get('Deployment', 'demo-orchestrator'),
          get('Secret', 'demo-nats'),
        ]);
        return left.every((o) => !o) ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
  });
});
