import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { call, type ScriptedReply, text } from '../../test/harness/llm.ts';
import { HOLT, NS, ROOT } from './ctx.ts';
import { GIT_SECRET } from './fixtures.ts';

const run = promisify(execFile);

/** The label by which the e2e finds what belongs to a Holt of its own. */
export const holtLabel = (holt: string): Record<string, string> => ({ 'e2e.holt.io/holt': holt });

/** A Holt document. */
export const holtDoc = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Holt',
  metadata: { name },
  spec,
});

/** An Agent document of `holt` (spec.holt first), with the Holt's label unless `label` is false. */
export const agentDoc = (
  name: string,
  holt: string,
  spec: Record<string, unknown>,
  { label = true }: { label?: boolean } = {},
) => ({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Agent',
  metadata: label ? { name, labels: holtLabel(holt) } : { name },
  spec: { holt, ...spec },
});

/** A WorkerPool document of `holt` (spec.holt first), with the Holt's label. */
export const workerPoolDoc = (name: string, holt: string, spec: Record<string, unknown>) => ({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'WorkerPool',
  metadata: { name, labels: holtLabel(holt) },
  spec: { holt, ...spec },
});

/** A command agent's Terminal result line (`payload` is the summary too). */
export const terminalResult = (type: string, payload: string): string =>
  JSON.stringify({
    artefact_type: type,
    artefact_payload: payload,
    summary: payload,
    structural_type: 'Terminal',
  });

/** Documents as one YAML stream, as `kubectl apply -f -` reads it. */
export const yamlDocs = (docs: unknown[]): string => docs.map((d) => stringify(d)).join('---\n');

/** examples/k8s/demo.yaml as it is, the Holt's workspace seeded from the in-cluster Git server. */
export function demoManifests(): string {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'examples', 'k8s', 'demo.yaml'), 'utf8')).map(
    (d) =>
      d.toJS() as {
        kind: string;
        metadata: { labels?: Record<string, string> };
        spec?: Record<string, unknown>;
      },
  );
  for (const d of docs) {
    if (d.kind === 'Agent') d.metadata.labels = { ...d.metadata.labels, ...holtLabel('demo') };
    if (d.kind === 'Holt') {
      const spec = d.spec ?? {};
      // A bid later than the demo's 10 s counts as ignore; a loaded CI machine must not change the path.
      spec.orchestrator = { ...(spec.orchestrator as object), bidTimeoutSeconds: 120 };
      spec.workspace = {
        ...(spec.workspace as object),
        gitUrl: `http://git.${NS}.svc:8080/demo.git`,
        gitSecretRef: { name: GIT_SECRET },
      };
      d.spec = spec;
    }
  }
  return yamlDocs(docs);
}

/** A Holt of one scalable agent whose tool takes a few seconds: backlog makes its pool scale out. */
export function scaleManifests(workspace?: Record<string, string>): string {
  const result = terminalResult('Slept', 'slept');
  return yamlDocs([
    holtDoc('scale', { orchestrator: { bidTimeoutSeconds: 120 }, ...(workspace ? { workspace } : {}) }),
    agentDoc('scale-sleeper', 'scale', {
      role: 'Sleeper',
      command: ['sh', '-c', `sleep 8; echo '${result}'`],
      bidding: { strategy: 'exclusive' },
      replicas: 3,
      workerPool: 'scale-sleeper-workers',
    }),
    workerPoolDoc('scale-sleeper-workers', 'scale', {
      role: 'Sleeper',
      target: 'sleeper',
      terminationGracePeriodSeconds: 60,
      autoscaling: {
        minReplicas: 0,
        maxReplicas: 3,
        targetBacklogPerReplica: 1,
        cooldownSeconds: 15,
        stabilizationSeconds: 10,
      },
    }),
  ]);
}

/**
 * A Holt whose one agent is the credential probe (e2e/probe), mounted from a ConfigMap into the
 * runtime image's agent container, with the Holt's store Services as targets.
 */
export function trustManifests(): string {
  const cfg = {
    inline: true,
    targets: { redis: ['trust-redis:6379'], nats: ['trust-nats:4222'], postgres: ['trust-postgres:5432'] },
    pgModule: '/opt/holt/app/package.json',
  };
  return yamlDocs([
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'trust-probe', labels: holtLabel('trust') },
      data: {
        'credential-probe.mjs': readFileSync(join(ROOT, 'e2e', 'probe', 'credential-probe.mjs'), 'utf8'),
      },
    },
    holtDoc('trust', { orchestrator: { bidTimeoutSeconds: 120 } }),
    agentDoc('trust-prober', 'trust', {
      role: 'Prober',
      command: ['node', '/probe/credential-probe.mjs', JSON.stringify(cfg)],
      bidding: { strategy: 'exclusive' },
      env: [{ name: 'DECLARED_FOR_TOOLS', value: 'visible' }],
      volumes: [{ name: 'probe', configMap: 'trust-probe', mountPath: '/probe' }],
    }),
  ]);
}

/** `holt convert examples/demo-llm/holt.yml`, seeded from its Git repository, each agent on its own model. */
export async function llmManifests(): Promise<string> {
  const { stdout } = await run(HOLT, ['convert', join(ROOT, 'examples', 'demo-llm', 'holt.yml')]);
  const docs = parseAllDocuments(stdout).map(
    (d) =>
      d.toJS() as {
        kind: string;
        metadata: { name: string; labels?: Record<string, string> };
        spec: Record<string, unknown>;
      },
  );
  for (const d of docs) {
    if (d.kind === 'Holt') {
      d.spec.workspace = {
        ...(d.spec.workspace as object),
        gitUrl: `http://git.${NS}.svc:8080/demo-llm.git`,
        gitSecretRef: { name: GIT_SECRET },
      };
      // The key would come from a Secret (apiKeySecretRef); the scripted server needs none.
      d.spec.llm = {};
    }
    if (d.kind === 'Agent') {
      d.metadata.labels = { ...d.metadata.labels, ...holtLabel('demo-llm') };
      const role = String(d.spec.role).toLowerCase();
      d.spec.llm = {
        ...(d.spec.llm as object),
        model: `scripted-${role}`,
        baseUrl: `http://llm.${NS}.svc:8080/v1`,
      };
      // The model server is a pod of the cluster (whose CIDRs no egress reaches): named by its labels.
      d.spec.egress = true;
      d.spec.egressTo = { pods: [{ labels: { app: 'llm' } }] };
    }
  }
  return yamlDocs(docs);
}

/** What the living agent's model answers, in order: a work item, a timer, the tool, the report, two closings. */
export const LIVING_SCRIPT: ScriptedReply[] = [
  call('work_create', { objective: 'Report on build 7 once it settles' }),
  call('wait', { for: 'timer', seconds: 45, on: 'build 7 to settle' }),
  call('lookup', { build: '7' }),
  { toolCalls: [{ name: 'work_complete', arguments: {} }], text: 'Build 7 is green: 212/212 tests passed.' },
  text('reported'),
  text('standing down'),
];

/** A Holt of one living agent with an ingress (exposed by an Ingress) and an asynchronous tool. */
export function livingManifests(baseUrl: string): string {
  return yamlDocs([
    holtDoc('living', { llm: {}, ingress: { expose: 'Ingress', host: 'agents.example.test' } }),
    agentDoc('living-watcher', 'living', {
      role: 'Watcher',
      bidding: { strategy: 'ignore' },
      llm: {
        model: 'scripted-watcher',
        baseUrl,
        maxSteps: 6,
        tools: [
          {
            name: 'lookup',
            description: 'Look a build up (the build service answers).',
            parameters: { type: 'object', properties: { build: { type: 'string' } }, required: ['build'] },
            async: 'nats',
            asyncTimeoutSeconds: 120,
          },
        ],
      },
      ingress: { enabled: true, tokens: [{ name: 'ci' }, { name: 'ops', origin: 'operator' }] },
      egress: true,
      egressTo: { pods: [{ labels: { app: 'llm-life' } }] },
    }),
  ]);
}

/**
 * A Holt of two command agents with the short bid timeout a user might pick (5 s): a Writer that
 * writes the Terminal result (after ten minutes when the goal says "slow": a workflow still running),
 * and a Noter that bids ignore. Both must be up and bidding before the Holt is Ready.
 */
export function lifeManifests(): string {
  const result = terminalResult('Written', 'written');
  return yamlDocs([
    holtDoc('life', { orchestrator: { bidTimeoutSeconds: 5 } }),
    agentDoc(
      'life-writer',
      'life',
      {
        role: 'Writer',
        command: ['sh', '-c', `in=$(cat); case "$in" in *slow*) sleep 600;; esac; echo '${result}'`],
        bidding: { strategy: 'exclusive' },
      },
      { label: false },
    ),
    agentDoc(
      'life-noter',
      'life',
      { role: 'Noter', command: ['sh', '-c', 'echo noted'], bidding: { strategy: 'ignore' } },
      { label: false },
    ),
  ]);
}

/** What the two A2A agents' one scripted model answers, in order (alpha asks, beta answers, alpha ends). */
export const A2A_SCRIPT: ScriptedReply[] = [
  call('ask_reporter', { message: 'How did build 9 do?' }),
  text('Build 9 is green: 300/300 tests passed.'),
  text('The reporter of Holt beta says build 9 is green.'),
];

/**
 * examples/a2a (two Holts in two namespaces: beta's living agent Reporter served over A2A by beta's
 * ingress; alpha's living agent Asker calling it as an asynchronous tool with beta's token, a Secret of
 * alpha's namespace), in the e2e's namespaces, on its scripted model: each agent's egress opens the model
 * server's pods instead of the internet's 443, and Asker's still opens beta's orchestrator alone.
 */
export function a2aManifests(
  ns: { alpha: string; beta: string },
  llmBase: string,
): { alpha: string; beta: string } {
  const llm = { namespace: NS, labels: { app: 'llm-a2a' } };
  // biome-ignore lint/suspicious/noExplicitAny: the example's YAML, read loosely and patched in place
  type Doc = { kind: string; spec: Record<string, any> };
  const read = (f: string) =>
    parseAllDocuments(readFileSync(join(ROOT, 'examples', 'a2a', f), 'utf8')).map((d) => d.toJS() as Doc);
  const patch = (docs: Doc[], model: string) => {
    for (const d of docs.filter((x) => x.kind === 'Agent')) {
      d.spec.llm = { ...d.spec.llm, model, baseUrl: llmBase };
      const e = d.spec.egressTo ?? {};
      const pods = (e.pods ?? []).map((p: { namespace?: string }) => ({
        ...p,
        namespace: p.namespace === 'holt-beta' ? ns.beta : p.namespace,
      }));
      d.spec.egressTo = {
        ...e,
        ports: [8080, ...(e.ports ?? []).filter((p: number) => p !== 443)],
        pods: [llm, ...pods],
      };
      for (const t of d.spec.llm.tools ?? [])
        if (t.a2a) t.a2a.url = String(t.a2a.url).replace('.holt-beta.svc', `.${ns.beta}.svc`);
    }
    return yamlDocs(docs);
  };
  return {
    beta: patch(read('beta.yaml'), 'scripted-reporter'),
    alpha: patch(read('alpha.yaml'), 'scripted-asker'),
  };
}
