import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type KubeCluster, startKube } from '../../../test/harness/kube.ts';
import { loadHoltFile, parseHoltFile } from '../holtfile.ts';
import { manifestsFromHoltFile } from '../manifests.ts';
import { MALFORMED, manifest } from './malformed.testkit.ts';

/** The generated CRDs on a real kube-apiserver: schema, CEL, explain, columns, subresources, samples. */
const ROOT = join(import.meta.dirname, '../../..');

describe('holt.io CRDs on kube-apiserver', () => {
  let kube: KubeCluster;
  beforeAll(async () => {
    kube = await startKube();
    await kube.kubectl(['apply', '--server-side', '-f', join(ROOT, 'crds')]);
    await kube.kubectl([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/holts.holt.io',
      'crd/agents.holt.io',
      'crd/workerpools.holt.io',
    ]);
  });
  afterAll(async () => {
    await kube?.stop();
  });

  it('kubectl explain shows the field descriptions', async () => {
    // The published OpenAPI catches up with new CRDs a few seconds after they are Established.
    let spec = '';
    for (let i = 0; i < 150 && !spec; i++) {
      const r = await kube.kubectlResult(['explain', 'holt.spec'], { allowFail: true });
      if (r.code === 0) spec = r.stdout;
      else await new Promise((r) => setTimeout(r, 200));
    }
    expect(spec).toContain('Desired state of the Holt.');
    expect(spec).toMatch(/stores\s+<Object>\s+The three stores a Holt needs\./);
    // kubectl wraps descriptions: compare with whitespace collapsed.
    const pg = (await kube.kubectl(['explain', 'holt.spec.stores.postgres.secretName'])).replace(/\s+/g, ' ');
    expect(pg).toContain("CloudNativePG's -app keys: uri host port username password dbname");
    const min = await kube.kubectl(['explain', 'workerpool.spec.autoscaling.minReplicas']);
    expect(min).toMatch(/minReplicas\s+<integer>/);
    expect(min).toContain('Lowest replica count (0 allows scale to zero).');
    const cond = (await kube.kubectl(['explain', 'agent.status.conditions.reason'])).replace(/\s+/g, ' ');
    expect(cond).toContain('Why, in one CamelCase word');
  });

  it(`rejects ${MALFORMED.length} malformed manifests with a message that names the problem`, async () => {
    expect(MALFORMED.length).toBeGreaterThanOrEqual(30);
    const failures: string[] = [];
    for (const m of MALFORMED) {
      const r = await kube.kubectlResult(['create', '--dry-run=server', '-o', 'name', '-f', '-'], {
        input: manifest(m),
        allowFail: true,
      });
      if (r.code === 0) failures.push(`${m.what}: accepted`);
      else if (!m.error.test(r.stderr)) failures.push(`${m.what}: ${r.stderr.trim()}`);
    }
    expect(failures).toEqual([]);
  });

  it('accepts the samples in examples/k8s and applies the defaults', async () => {
    const out = await kube.kubectl(['apply', '-f', join(ROOT, 'examples/k8s')]);
    expect(out).toContain('holt.holt.io/demo created');
    expect(out).toContain('holt.holt.io/minimal created');
    expect(out.match(/agent\.holt\.io\/demo-\S+ created/g)).toHaveLength(5);
    const minimal = JSON.parse(await kube.kubectl(['get', 'holt', 'minimal', '-o', 'json'])) as {
      spec: { stores: { postgres: { mode: string; storage: string } }; orchestrator: { replicas: number } };
    };
    expect(minimal.spec.stores.postgres).toEqual({ mode: 'bundled', storage: '1Gi' });
    expect(minimal.spec.orchestrator.replicas).toBe(1);
    const drafter = JSON.parse(await kube.kubectl(['get', 'agent', 'demo-drafter', '-o', 'json'])) as {
      spec: { replicas: number; strategy: string; egress: boolean };
    };
    expect(drafter.spec).toMatchObject({ replicas: 1, strategy: 'reuse', egress: false });
    // Applying again changes nothing.
    expect(await kube.kubectl(['apply', '-f', join(ROOT, 'examples/k8s')])).not.toMatch(/configured|created/);
    // And the two Holts talking A2A (examples/a2a).
    const a2a = await kube.kubectl(['apply', '-f', join(ROOT, 'examples/a2a')]);
    expect(a2a).toContain('agent.holt.io/alpha-asker created');
    expect(a2a).toContain('agent.holt.io/beta-reporter created');
    const cat = await kube.kubectl(['get', 'holt-all']);
    expect(cat).toContain('holt.holt.io/minimal');
    expect(cat).toContain('workerpool.holt.io/minimal-coder-workers');
  });

  it('accepts what `holt convert` prints for the demo Holt file', async () => {
    const docs = manifestsFromHoltFile(
      loadHoltFile(join(ROOT, 'examples/demo/holt.yml')),
      'convert',
      'default',
    );
    const input = docs.map((d) => stringify(d)).join('---\n');
    const out = await kube.kubectl(['create', '--dry-run=server', '-o', 'name', '-f', '-'], { input });
    expect(out.trim().split('\n')).toHaveLength(docs.length);
  });

  it("keeps a workflow agent's steps and its turn contract through `holt convert` (nothing pruned by the schema)", async () => {
    const docs = manifestsFromHoltFile(
      parseHoltFile(`version: "2"
agents:
  Triage:
    bidding_strategy: exclusive
    llm:
      must_end_with: publish
      result_fields: {title: {type: string}}
      file_tools: true
      work_items: true
      history_keep: 5
      turn_timeout: 10m
      tools: [{name: publish, argv: [./publish.sh], terminate: true}]
      workflow:
        - {name: classify, llm: {prompt: "Classify {{target}}", output: {label: {type: string}}}}
        - {name: route, branch: {field: classify.label, cases: {bug: fix}, default: end}}
        - {name: fix, code: {argv: [./fix.sh, "{{classify.label}}"], timeout: 2m}}
`),
      'wf',
      'default',
    );
    const agent = docs.find((d) => d.kind === 'Agent');
    const out = JSON.parse(
      await kube.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], {
        input: stringify(agent),
      }),
    );
    expect(out.spec.llm).toMatchObject({
      mustEndWith: 'publish',
      resultFields: { title: { type: 'string', required: true } },
      fileTools: true,
      workItems: true,
      historyKeep: 5,
      turnTimeoutSeconds: 600,
      tools: [{ name: 'publish', terminate: true }],
    });
    expect(out.spec.llm.workflow).toMatchObject([
      { name: 'classify', llm: { prompt: 'Classify {{target}}', output: { label: { type: 'string' } } } },
      { name: 'route', branch: { field: 'classify.label', cases: { bug: 'fix' }, default: 'end' } },
      { name: 'fix', code: { argv: ['./fix.sh', '{{classify.label}}'], timeoutSeconds: 120 } },
    ]);
  });

  it('printer columns and the status subresource', async () => {
    const status = {
      status: {
        observedGeneration: 1,
        phase: 'Ready',
        agents: { total: 5, ready: 4 },
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'AllComponentsReady',
            message: '',
            lastTransitionTime: '2025-01-01T00:00:00Z',
            observedGeneration: 1,
          },
        ],
      },
    };
    await kube.kubectl([
      'patch',
      'holt',
      'demo',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify(status),
    ]);
    const table = await kube.kubectl(['get', 'holt', 'demo']);
    expect(table).toMatch(/^NAME\s+PHASE\s+READY\s+AGENTS\s+AGE\n/);
    expect(table).toMatch(/\ndemo\s+Ready\s+True\s+5\s+\S+\n/);
    // status is not writable through the main resource...
    await kube.kubectl(['patch', 'holt', 'demo', '--type=merge', '-p', '{"status":{"phase":"Degraded"}}']);
    expect(await kube.kubectl(['get', 'holt', 'demo', '-o', 'jsonpath={.status.phase}'])).toBe('Ready');
    // ...and is validated like the spec.
    const bad = { status: { conditions: [{ type: 'Ready', status: 'Yes', reason: 'x', message: '' }] } };
    const r = await kube.kubectlResult(
      ['patch', 'holt', 'demo', '--subresource=status', '--type=merge', '-p', JSON.stringify(bad)],
      { allowFail: true },
    );
    expect(r.stderr).toMatch(/status\.conditions\[0\]\.status: Unsupported value: "Yes"/);
    expect(r.stderr).toMatch(/status\.conditions\[0\]\.lastTransitionTime: Required value/);
    expect(await kube.kubectl(['get', 'agents'])).toMatch(
      /^NAME\s+ROLE\s+REPLICAS\s+READY\s+IN-FLIGHT\s+AGE\n/,
    );
    expect(await kube.kubectl(['get', 'workerpools'])).toMatch(
      /^NAME\s+TARGET\s+REPLICAS\s+DESIRED\s+BACKLOG\s+AGE\nminimal-coder-workers\s+coder\s/,
    );
  });

  it('kubectl scale drives spec.replicas through the scale subresource, within maxReplicas', async () => {
    const wp = 'workerpool/minimal-coder-workers';
    await kube.kubectl(['scale', wp, '--replicas=3']);
    expect(await kube.kubectl(['get', wp, '-o', 'jsonpath={.spec.replicas}'])).toBe('3');
    const over = await kube.kubectlResult(['scale', wp, '--replicas=9'], { allowFail: true });
    expect(over.stderr).toMatch(/replicas must not exceed autoscaling\.maxReplicas/);
    // What an HPA reads: status replicas and the selector, as published by the operator.
    const status = { status: { replicas: 3, selector: 'holt.io/workerpool=minimal-coder-workers' } };
    await kube.kubectl(['patch', wp, '--subresource=status', '--type=merge', '-p', JSON.stringify(status)]);
    const scale = JSON.parse(
      await kube.kubectl([
        'get',
        '--raw',
        '/apis/holt.io/v1alpha1/namespaces/default/workerpools/minimal-coder-workers/scale',
      ]),
    ) as { spec: { replicas: number }; status: { replicas: number; selector: string } };
    expect(scale).toMatchObject({
      spec: { replicas: 3 },
      status: { replicas: 3, selector: 'holt.io/workerpool=minimal-coder-workers' },
    });
  });
});
