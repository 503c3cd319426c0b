import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1PodSpec } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { type KubeCluster, startKube } from './harness/kube.ts';
import { monitoringCrds } from './harness/monitoring.ts';

/** charts/holt-operator: lint, template, and install/upgrade/uninstall on a real kube-apiserver. */
const CHART = join(import.meta.dirname, '../charts/holt-operator');
const NS = 'holt-system';

interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  spec?: { template?: { metadata?: { annotations?: Record<string, string> }; spec?: V1PodSpec } };
  rules?: Rule[];
}
type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };

describe('the holt-operator Helm chart', () => {
  let kube: KubeCluster;
  const helmSA = `system:serviceaccount:${NS}:holt-holt-operator`;
  const render = async (...set: string[]): Promise<Obj[]> => {
    const out = await kube.helm(['template', 'holt', CHART, '-n', NS, ...set.flatMap((s) => ['--set', s])]);
    return parseAllDocuments(out)
      .map((d) => d.toJS() as Obj | null)
      .filter((d): d is Obj => d !== null);
  };
  const getJson = async (kind: string, name: string, ns: string): Promise<unknown> =>
    JSON.parse(await kube.kubectl(['get', kind, name, '-n', ns, '-o', 'json']));
  const canI = async (...args: string[]) =>
    (
      await kube.kubectlResult(['auth', 'can-i', ...args, `--as=${helmSA}`], { allowFail: true })
    ).stdout.trim();

  beforeAll(async () => {
    kube = await startKube();
  });
  afterAll(async () => {
    await kube?.stop();
  });

  it("the chart's version and appVersion are the project's (package.json, the one place: make version)", () => {
    const chart = parseAllDocuments(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'))[0]?.toJS() as {
      version: string;
      appVersion: string;
    };
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(chart.version).toBe(version);
    expect(chart.appVersion).toBe(version);
  });

  it('helm lint --strict passes without warnings', async () => {
    const out = await kube.helm(['lint', '--strict', CHART]);
    expect(out).toContain('0 chart(s) failed');
    expect(out).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  it('values.schema.json: a wrong type or an unknown key fails helm install, naming it, and creates nothing', async () => {
    for (const [set, says] of [
      ['replicaCount=two', 'replicaCount'],
      ['metrics.prot=9090', 'prot'],
      ['bogus=1', 'bogus'],
      ['logLevel=loud', 'logLevel'],
      ['tracing.samplerRatio=2', 'samplerRatio'],
      ['image.pullPolicy=Sometimes', 'pullPolicy'],
    ] as const) {
      const failed = await kube
        .helm(['install', 'bad', CHART, '-n', 'schema-check', '--create-namespace', '--set', set])
        .then(
          () => null,
          (e: unknown) => String(e),
        );
      expect(failed, set).toMatch(/schema/i);
      expect(failed, set).toContain(says);
    }
    expect(await kube.helm(['list', '-A', '-q'])).not.toContain('bad');
  });

  it("the operator's pod template carries the scrape hints (metrics.port) beside the user's podAnnotations", async () => {
    const dep = (await render('metrics.port=9100', 'podAnnotations.team=ml')).find(
      (o) => o.kind === 'Deployment',
    );
    expect(dep?.spec?.template?.metadata?.annotations).toEqual({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '9100',
      'prometheus.io/path': '/metrics',
      team: 'ml',
    });
  });

  it('monitoring (off by default): a ServiceMonitor, the alerts and the dashboard, accepted by the real Prometheus Operator CRDs', async () => {
    const kinds = (objs: Obj[]) => objs.map((o) => o.kind);
    const plain = await render();
    expect(kinds(plain)).not.toContain('ServiceMonitor');
    expect(kinds(plain)).not.toContain('PrometheusRule');
    expect(plain.some((o) => o.kind === 'ConfigMap')).toBe(false);
    // The CRDs a cluster with the Prometheus Operator has; the API server checks every object against them.
    for (const crd of await monitoringCrds()) await kube.kubectl(['apply', '--server-side', '-f', crd]);
    for (const k of ['servicemonitors', 'podmonitors', 'prometheusrules'])
      await kube.kubectl([
        'wait',
        '--for=condition=Established',
        '--timeout=60s',
        `crd/${k}.monitoring.coreos.com`,
      ]);
    const on = [
      'metrics.serviceMonitor.enabled=true',
      'metrics.prometheusRule.enabled=true',
      'metrics.dashboard.enabled=true',
    ];
    await kube.helm([
      'install',
      'mon',
      CHART,
      '-n',
      'monitoring-check',
      '--create-namespace',
      '--set',
      'crds.install=false',
      ...on.flatMap((s) => ['--set', s]),
      '--set',
      'metrics.serviceMonitor.labels.release=prometheus',
    ]);
    const sm = (await getJson('servicemonitor', 'mon-holt-operator', 'monitoring-check')) as {
      metadata: { labels: Record<string, string> };
      spec: { endpoints: { port: string }[] };
    };
    expect(sm.metadata.labels.release).toBe('prometheus');
    expect(sm.spec.endpoints[0]?.port).toBe('metrics');
    const rule = (await getJson('prometheusrule', 'mon-holt-operator', 'monitoring-check')) as {
      spec: { groups: { rules: { alert: string }[] }[] };
    };
    expect(rule.spec.groups[0]?.rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining([
        'HoltOrchestratorWithoutLeader',
        'HoltInboxBacklogGrowing',
        'HoltPodCrashLooping',
        'HoltAgentBudgetExhausted',
        'HoltRecordsQuarantined',
        'HoltAgentBidsLate',
      ]),
    );
    const cm = (await getJson('configmap', 'mon-holt-operator-dashboard', 'monitoring-check')) as {
      metadata: { labels: Record<string, string> };
      data: Record<string, string>;
    };
    expect(cm.metadata.labels.grafana_dashboard).toBe('1');
    expect((JSON.parse(cm.data['holt.json'] ?? '{}') as { uid?: string }).uid).toBe('holt-overview');
    await kube.helm(['uninstall', 'mon', '-n', 'monitoring-check']);
  });

  it('sets only environment variables the operator reads (the chart and `holt operator` agree)', async () => {
    const dep = (await render('tracing.endpoint=http://jaeger:4318', 'tracing.samplerRatio=0.5')).find(
      (o) => o.kind === 'Deployment',
    );
    const vars = dep?.spec?.template?.spec?.containers?.[0]?.env ?? [];
    const env = vars.map((e) => e.name);
    expect(env.length).toBeGreaterThan(4);
    expect(vars).toContainEqual({ name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://jaeger:4318' });
    expect(vars).toContainEqual({ name: 'OTEL_TRACES_SAMPLER_ARG', value: '0.5' });
    const plain = (await render()).find((o) => o.kind === 'Deployment');
    expect(plain?.spec?.template?.spec?.containers?.[0]?.env?.map((e) => e.name)).not.toContain(
      'OTEL_EXPORTER_OTLP_ENDPOINT',
    );
    const sources = ['src/operator/main.ts', 'src/common/logger.ts', 'src/telemetry/settings.ts']
      .map((f) => readFileSync(join(import.meta.dirname, '..', f), 'utf8'))
      .join('\n');
    const unread = env.filter((name) => !sources.includes(`env.${name}`) && !sources.includes(`'${name}'`));
    expect(unread).toEqual([]);
  });

  it('renders a hardened operator Deployment, metrics Service and least-privilege RBAC', async () => {
    const objs = await render();
    const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    // Namespaced by default: the operator's Role in the release namespace, nothing cluster-wide but
    // the CRDs, the aggregated user roles and the get of nodes and PVs (a volume lost with its node).
    expect(kinds).toEqual([
      'ClusterRole/holt-holt-operator-edit',
      'ClusterRole/holt-holt-operator-read-nodes',
      'ClusterRole/holt-holt-operator-view',
      'ClusterRoleBinding/holt-holt-operator-read-nodes',
      'CustomResourceDefinition/agents.holt.io',
      'CustomResourceDefinition/holts.holt.io',
      'CustomResourceDefinition/toolservers.holt.io',
      'CustomResourceDefinition/workerpools.holt.io',
      'Deployment/holt-holt-operator',
      'Role/holt-holt-operator',
      'Role/holt-holt-operator-leader-election',
      'RoleBinding/holt-holt-operator',
      'RoleBinding/holt-holt-operator-leader-election',
      'Service/holt-holt-operator-metrics',
      'ServiceAccount/holt-holt-operator',
    ]);
    for (const crd of objs.filter((o) => o.kind === 'CustomResourceDefinition'))
      expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');

    const pod = objs.find((o) => o.kind === 'Deployment')!.spec!.template!.spec!;
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const c = pod.containers[0]!;
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.livenessProbe).toMatchObject({
      httpGet: { path: '/healthz', port: 'health' },
      timeoutSeconds: 5,
      failureThreshold: 3,
    });
    expect(c.readinessProbe).toMatchObject({
      httpGet: { path: '/readyz', port: 'health' },
      timeoutSeconds: 5,
    });
    expect(c.ports?.map((p) => p.name)).toEqual(['metrics', 'health']);

    const rules = objs.find((o) => o.kind === 'Role' && o.metadata.name === 'holt-holt-operator')!.rules!;
    expect(
      objs.find((o) => o.kind === 'Role' && o.metadata.name === 'holt-holt-operator')?.metadata.namespace,
    ).toBe(NS);
    for (const r of rules) {
      expect(r.verbs).not.toContain('*');
      expect(r.resources).not.toContain('*');
    }
    const granted = (group: string, resource: string) =>
      rules
        .filter((r) => r.apiGroups.includes(group) && r.resources.includes(resource))
        .flatMap((r) => r.verbs);
    // Only what src/operator calls: pods are listed, watched and read (dead workers), annotated (deletion
    // cost), never deleted; a worker's log is only read; the autoscaler applies spec.replicas on the
    // resource, so /scale is left to HPA/KEDA/kubectl.
    expect(granted('', 'pods').sort()).toEqual(['get', 'list', 'patch', 'watch']);
    expect(granted('', 'pods/log')).toEqual(['get']);
    expect(granted('', 'configmaps')).toEqual([]);
    expect(granted('', 'events')).toEqual([]);
    expect(granted('', 'nodes')).toEqual([]);
    expect(granted('rbac.authorization.k8s.io', 'roles')).toEqual([]);
    expect(granted('holt.io', 'workerpools/scale')).toEqual([]);
    expect(granted('holt.io', 'holts').sort()).toEqual(['get', 'list', 'watch']);
    expect(granted('holt.io', 'holts/status')).toEqual(['patch']);
    // ToolServers are read, never written but for their status (tools discovered by the operator).
    expect(granted('holt.io', 'toolservers').sort()).toEqual(['get', 'list', 'watch']);
    expect(granted('holt.io', 'toolservers/status')).toEqual(['patch']);
    expect(granted('events.k8s.io', 'events')).toEqual(['create']);
    // Secrets by name only: a list or watch would read every Secret of the namespace.
    expect(granted('', 'secrets').sort()).toEqual(['create', 'delete', 'get', 'patch']);
    // No PUTs: objects are applied; only the owners' finalizers (blockOwnerDeletion) take update.
    for (const r of rules)
      if (!r.resources.every((x) => x.endsWith('/finalizers'))) expect(r.verbs).not.toContain('update');

    // Watching listed namespaces: Roles there, nothing cluster-wide but the user roles.
    const scoped = await render('watchNamespaces={team-a,team-b}', 'crds.install=false');
    const roles = scoped
      .filter((o) => o.kind === 'Role')
      .map((o) => `${o.metadata.namespace}/${o.metadata.name}`);
    expect(roles.sort()).toEqual([
      `${NS}/holt-holt-operator-leader-election`,
      'team-a/holt-holt-operator',
      'team-b/holt-holt-operator',
    ]);
    expect(scoped.filter((o) => o.kind === 'ClusterRoleBinding').map((o) => o.metadata.name)).toEqual([
      'holt-holt-operator-read-nodes',
    ]);
    const readNodes = scoped.find((o) => o.kind === 'ClusterRole' && o.metadata.name.endsWith('-read-nodes'));
    expect(readNodes?.rules).toEqual([
      { apiGroups: [''], resources: ['nodes', 'persistentvolumes'], verbs: ['get'] },
    ]);
    // readNodes=false: nothing cluster-wide at all but the user roles.
    const none = await render('readNodes=false', 'crds.install=false');
    expect(none.some((o) => o.kind === 'ClusterRoleBinding')).toBe(false);
    expect(scoped.some((o) => o.kind === 'CustomResourceDefinition')).toBe(false);
    const envOf = (objs: Obj[], name: string) =>
      objs
        .find((o) => o.kind === 'Deployment')
        ?.spec?.template?.spec?.containers?.[0]?.env?.find((e) => e.name === name)?.value;
    expect(envOf(scoped, 'HOLT_OPERATOR_NAMESPACES')).toBe('team-a,team-b');
    expect(envOf(objs, 'HOLT_OPERATOR_NAMESPACES')).toBe(NS);

    // Cluster-wide only when asked: a ClusterRole and an empty namespace list (all).
    const wide = await render('clusterWide=true', 'crds.install=false');
    expect(wide.filter((o) => o.kind === 'ClusterRoleBinding').map((o) => o.metadata.name)).toEqual([
      'holt-holt-operator',
      'holt-holt-operator-read-nodes',
    ]);
    expect(wide.filter((o) => o.kind === 'Role').map((o) => o.metadata.name)).toEqual([
      'holt-holt-operator-leader-election',
    ]);
    expect(envOf(wide, 'HOLT_OPERATOR_NAMESPACES')).toBe('');
  });

  it('helm install creates the objects and CRDs; the ServiceAccount can do only what the operator needs', async () => {
    await kube.helm(['install', 'holt', CHART, '-n', NS, '--create-namespace']);
    const names = await kube.kubectl([
      'get',
      'deployment,serviceaccount,service,role,rolebinding',
      '-n',
      NS,
      '-o',
      'name',
    ]);
    for (const n of [
      'deployment.apps/holt-holt-operator',
      'serviceaccount/holt-holt-operator',
      'service/holt-holt-operator-metrics',
      'role.rbac.authorization.k8s.io/holt-holt-operator-leader-election',
    ])
      expect(names).toContain(n);
    await kube.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/workerpools.holt.io']);

    // What the operator does (src/operator): apply (patch), create, prune, status by SSA, the Lease.
    expect(await canI('create', 'deployments.apps', '-n', NS)).toBe('yes');
    expect(await canI('patch', 'deployments.apps', '-n', NS)).toBe('yes');
    expect(await canI('delete', 'jobs.batch', '-n', NS)).toBe('yes');
    expect(await canI('get', 'secrets', '-n', NS)).toBe('yes');
    expect(await canI('list', 'secrets', '-n', NS)).toBe('no');
    expect(await canI('watch', 'secrets', '-n', NS)).toBe('no');
    // Namespaced by default: nothing in any other namespace.
    for (const verb of ['create', 'patch'])
      expect(await canI(verb, 'deployments.apps', '-n', 'anywhere')).toBe('no');
    expect(await canI('get', 'secrets', '-n', 'anywhere')).toBe('no');
    expect(await canI('list', 'holts.holt.io', '--all-namespaces')).toBe('no');
    expect(await canI('patch', 'workerpools.holt.io', '-n', NS)).toBe('yes');
    expect(await canI('patch', 'agents.holt.io', '-n', NS)).toBe('yes');
    expect(await canI('patch', 'holts.holt.io', '--subresource=status', '-n', NS)).toBe('yes');
    expect(await canI('update', 'agents.holt.io', '--subresource=finalizers', '-n', NS)).toBe('yes');
    expect(await canI('list', 'pods', '-n', NS)).toBe('yes');
    expect(await canI('patch', 'pods', '-n', NS)).toBe('yes');
    expect(await canI('get', 'pods', '--subresource=log', '-n', NS)).toBe('yes');
    expect(await canI('create', 'events.events.k8s.io', '-n', NS)).toBe('yes');
    expect(await canI('create', 'leases.coordination.k8s.io', '-n', NS)).toBe('yes');
    expect(await canI('update', 'leases.coordination.k8s.io', '-n', NS)).toBe('yes');
    // Least privilege: nothing it does not use.
    expect(await canI('create', 'leases.coordination.k8s.io', '-n', 'default')).toBe('no');
    expect(await canI('delete', 'leases.coordination.k8s.io', '-n', NS)).toBe('no');
    expect(await canI('create', 'pods', '-n', NS)).toBe('no');
    expect(await canI('delete', 'pods', '-n', NS)).toBe('no');
    expect(await canI('get', 'configmaps', '-n', NS)).toBe('no');
    expect(await canI('patch', 'workerpools.holt.io', '--subresource=scale', '-n', NS)).toBe('no');
    expect(await canI('update', 'holts.holt.io', '-n', NS)).toBe('no');
    expect(await canI('patch', 'holts.holt.io', '-n', NS)).toBe('no');
    expect(await canI('update', 'deployments.apps', '-n', NS)).toBe('no');
    expect(await canI('create', 'events', '-n', NS)).toBe('no');
    // Nodes and PersistentVolumes: read by name only (a volume lost with its node), never listed.
    expect(await canI('get', 'nodes')).toBe('yes');
    expect(await canI('get', 'persistentvolumes')).toBe('yes');
    expect(await canI('list', 'nodes')).toBe('no');
    expect(await canI('watch', 'persistentvolumes')).toBe('no');
    expect(await canI('patch', 'nodes')).toBe('no');
    expect(await canI('create', 'clusterroles')).toBe('no');
    expect(await canI('delete', 'customresourcedefinitions')).toBe('no');
  });

  it('helm upgrade re-applies changed CRDs; helm uninstall keeps them', async () => {
    // The next chart version changes a CRD (a printer column renamed): upgrade must apply it.
    const next = join(kube.dir, 'chart-next');
    cpSync(CHART, next, { recursive: true });
    const crdFile = join(next, 'files/crds/holt.io_holts.yaml');
    writeFileSync(crdFile, readFileSync(crdFile, 'utf8').replace('name: Phase', 'name: State'));
    await kube.helm(['upgrade', 'holt', next, '-n', NS, '--set', 'replicaCount=2']);
    const cols = await kube.kubectl([
      'get',
      'crd',
      'holts.holt.io',
      '-o',
      'jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}',
    ]);
    expect(cols.split(' ')).toEqual(['State', 'Ready', 'Agents', 'Agents-Ready', 'Reason', 'Age']);
    expect(
      await kube.kubectl([
        'get',
        'deploy',
        'holt-holt-operator',
        '-n',
        NS,
        '-o',
        'jsonpath={.spec.replicas}',
      ]),
    ).toBe('2');

    await kube.helm(['uninstall', 'holt', '-n', NS]);
    expect(await kube.kubectl(['get', 'deploy', '-n', NS, '-o', 'name'])).toBe('');
    expect(await kube.kubectl(['get', 'crd', '-o', 'name'])).toMatch(/holts\.holt\.io/);
  });
});
