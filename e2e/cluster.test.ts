import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { A2A_NS, c, kubectl, LIFE_NS, NS, progress, ROOT, setTarget } from './cluster/ctx.ts';
import { gitServer, llmServer } from './cluster/fixtures.ts';
import { a2aTests } from './cluster/sections/a2a.ts';
import { cliTests } from './cluster/sections/cli.ts';
import { demoTests } from './cluster/sections/demo.ts';
import { externalTests } from './cluster/sections/external.ts';
import { jobsTests } from './cluster/sections/jobs.ts';
import { lifecycleTests } from './cluster/sections/lifecycle.ts';
import { llmTests } from './cluster/sections/llm.ts';
import { mcpTests } from './cluster/sections/mcp.ts';
import { metricsTests } from './cluster/sections/metrics.ts';
import { nodesTests } from './cluster/sections/nodes.ts';
import { operatorTests } from './cluster/sections/operator.ts';
import { teardownTests } from './cluster/sections/teardown.ts';
import { tlsTests } from './cluster/sections/tls.ts';
import { toolServerTests } from './cluster/sections/toolserver.ts';
import { tracesTests } from './cluster/sections/traces.ts';
import { trustTests } from './cluster/sections/trust.ts';
import { e2eTarget } from './cluster/target.ts';
import { DEMO_LLM_SCRIPT } from './demo-llm-script.ts';
import { MONITORING_NS, prometheusManifests } from './prometheus.ts';

/**
 * The whole product on a real cluster: the chart installed with the built operator image, Holts from
 * `kubectl apply`, bundled stores as StatefulSets on PVCs, every agent in a real container run by a
 * real kubelet, goals and trails through `holt --kube`. The project's own cluster (two nodes) unless
 * HOLT_E2E_KUBECONFIG names another (kind: e2e/kind/run.sh).
 *
 * The tests live in e2e/cluster/sections, one file a concern. They run in two lanes at once, each
 * lane's sections one after another: the demo lane makes the Holts that metrics reads; the other
 * lane's sections each bring their own Holt or namespace. Then, alone: teardown (which deletes what
 * the lanes left) and the lost node. HOLT_E2E_ONLY=demo,llm runs the named sections alone, for work on
 * one of them; `make test` runs them all.
 */
/** Sections by lane: the lanes run at once, a lane's sections in order; then the closing ones, alone. */
const LANES: [string, [string, () => void][]][] = [
  [
    'the demo Holts',
    [
      ['operator', operatorTests],
      ['demo', demoTests],
      ['llm', llmTests],
      ['cli', cliTests],
      ['metrics', metricsTests],
    ],
  ],
  [
    'Holts of their own',
    [
      ['lifecycle', lifecycleTests],
      ['trust', trustTests],
      ['tls', tlsTests],
      ['jobs', jobsTests],
      ['external', externalTests],
      ['mcp', mcpTests],
      ['toolserver', toolServerTests],
      ['traces', tracesTests],
      ['a2a', a2aTests],
    ],
  ],
];
const CLOSING: [string, () => void][] = [
  ['teardown', teardownTests],
  ['nodes', nodesTests],
];
const SECTIONS = [...LANES.flatMap(([, s]) => s), ...CLOSING];
const only = process.env.HOLT_E2E_ONLY?.split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const name of only ?? []) {
  if (!SECTIONS.some(([n]) => n === name))
    throw new Error(`HOLT_E2E_ONLY: no section ${name} (sections: ${SECTIONS.map(([n]) => n).join(', ')})`);
}

beforeAll(async () => {
  setTarget(await e2eTarget(Number(process.env.HOLT_E2E_NODES ?? 2), progress));
  await c.kubectl(['create', 'namespace', NS]);
  await c.kubectl(['create', 'namespace', LIFE_NS]);
  for (const ns of Object.values(A2A_NS)) await c.kubectl(['create', 'namespace', ns]);
  progress('helm install holt-operator');
  await c.helm([
    'install',
    'holt-operator',
    join(ROOT, 'charts', 'holt-operator'),
    '-n',
    'holt-system',
    '--create-namespace',
    '--set',
    // LIFE_NS: a namespace of its own for the lifecycle tests, which end by deleting it.
    `watchNamespaces={${[NS, LIFE_NS, ...Object.values(A2A_NS)].join(',')}}`,
    '--wait',
    '--timeout',
    '5m',
  ]);
  const llmDemo = join(ROOT, 'examples', 'demo-llm');
  const seedLlm = Object.fromEntries(
    ['holt.yml', 'agents/bid-on.mjs', 'agents/lib.mjs'].map((f) => [
      f,
      readFileSync(join(llmDemo, f), 'utf8'),
    ]),
  );
  await kubectl(
    ['apply', '-f', '-'],
    gitServer(randomBytes(12).toString('hex'), { demo: {}, 'demo-llm': seedLlm }),
  );
  // The script five times over: the LLM test runs it once; the dashboard picture runs it again.
  await kubectl(['apply', '-f', '-'], llmServer(Array(5).fill(DEMO_LLM_SCRIPT).flat()));
  await kubectl(['rollout', 'status', 'deploy/git', '--timeout=180s']);
  await kubectl(['rollout', 'status', 'deploy/llm', '--timeout=180s']);
  // Scrapes every pod that carries the scrape hints, from now to the end of the run (the project's own
  // cluster loads the Prometheus image; another cluster skips the metrics test).
  if (c.local) {
    await c.kubectl(['create', 'namespace', MONITORING_NS]);
    await c.kubectl(['apply', '-f', '-'], { input: prometheusManifests() });
    await c.kubectl(['-n', MONITORING_NS, 'rollout', 'status', 'deploy/prometheus', '--timeout=180s']);
  }
}, 900_000);

afterAll(async () => {
  if (c) {
    await c.keepLogs('end');
    await c.helm(['uninstall', 'holt-operator', '-n', 'holt-system']).catch(() => {});
    for (const ns of [NS, ...Object.values(A2A_NS)])
      await c.kubectl(['delete', 'namespace', ns, '--wait=false'], { allowFail: true }).catch(() => {});
    await c.stop();
  }
}, 300_000);

describe('Holt on a real cluster (real kubelet, containers from the built images)', () => {
  const run = (sections: [string, () => void][]) => {
    for (const [name, tests] of sections) if (!only || only.includes(name)) tests();
  };
  // A concurrent suite per lane runs beside the other; inside it, a suite that is not concurrent keeps
  // the lane's tests in order (a section's own it.concurrent tests still run together).
  const chosen = (sections: [string, () => void][]) => sections.some(([n]) => !only || only.includes(n));
  for (const [lane, sections] of LANES.filter(([, s]) => chosen(s)))
    describe.concurrent(lane, () => {
      describe(`${lane}, in order`, { concurrent: false }, () => run(sections));
    });
  run(CLOSING);
});
