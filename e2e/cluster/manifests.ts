import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { call, type ScriptedReply, text } from '../../test/harness/llm.ts';
import { HOLT, NS, ROOT } from './ctx.ts';
import { GIT_SECRET } from './fixtures.ts';

const run = promisify(execFile);
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
    if (d.kind === 'Agent') d.metadata.labels = { ...d.metadata.labels, 'e2e.holt.io/holt': 'demo' };
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
  return docs.map((d) => stringify(d)).join('---\n');
}

/** A Holt of one scalable agent whose tool takes a few seconds: backlog makes its pool scale out. */
export function scaleManifests(workspace?: Record<string, string>): string {
  const result = JSON.stringify({
    artefact_type: 'Slept',
    artefact_payload: 'slept',
    summary: 'slept',
    structural_type: 'Terminal',
  });
  const label = { 'e2e.holt.io/holt': 'scale' };
  return [
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'scale' },
      spec: { orchestrator: { bidTimeoutSeconds: 120 }, ...(workspace ? { workspace } : {}) },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'scale-sleeper', labels: label },
      spec: {
        holt: 'scale',
        role: 'Sleeper',
        command: ['sh', '-c', `sleep 8; echo '${result}'`],
        bidding: { strategy: 'exclusive' },
        replicas: 3,
        workerPool: 'scale-sleeper-workers',
      },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'WorkerPool',
      metadata: { name: 'scale-sleeper-workers', labels: label },
      spec: {
        holt: 'scale',
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
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
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
  const label = { 'e2e.holt.io/holt': 'trust' };
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'trust-probe', labels: label },
      data: {
        'credential-probe.mjs': readFileSync(join(ROOT, 'e2e', 'probe', 'credential-probe.mjs'), 'utf8'),
      },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'trust' },
      spec: { orchestrator: { bidTimeoutSeconds: 120 } },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'trust-prober', labels: label },
      spec: {
        holt: 'trust',
        role: 'Prober',
        command: ['node', '/probe/credential-probe.mjs', JSON.stringify(cfg)],
        bidding: { strategy: 'exclusive' },
        env: [{ name: 'DECLARED_FOR_TOOLS', value: 'visible' }],
        volumes: [{ name: 'probe', configMap: 'trust-probe', mountPath: '/probe' }],
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
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
      d.metadata.labels = { ...d.metadata.labels, 'e2e.holt.io/holt': 'demo-llm' };
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
  return docs.map((d) => stringify(d)).join('---\n');
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
  return [
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'living' },
      spec: { llm: {}, ingress: { expose: 'Ingress', host: 'agents.example.test' } },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'living-watcher', labels: { 'e2e.holt.io/holt': 'living' } },
      spec: {
        holt: 'living',
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
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
}

/**
 * A Holt of two command agents with the short bid timeout a user might pick (5 s): a Writer that
 * writes the Terminal result (after ten minutes when the goal says "slow": a workflow still running),
 * and a Noter that bids ignore. Both must be up and bidding before the Holt is Ready.
 */
export function lifeManifests(): string {
  const result = JSON.stringify({
    artefact_type: 'Written',
    artefact_payload: 'written',
    summary: 'written',
    structural_type: 'Terminal',
  });
  return [
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Holt',
      metadata: { name: 'life' },
      spec: { orchestrator: { bidTimeoutSeconds: 5 } },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'life-writer' },
      spec: {
        holt: 'life',
        role: 'Writer',
        command: ['sh', '-c', `in=$(cat); case "$in" in *slow*) sleep 600;; esac; echo '${result}'`],
        bidding: { strategy: 'exclusive' },
      },
    },
    {
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'life-noter' },
      spec: {
        holt: 'life',
        role: 'Noter',
        command: ['sh', '-c', 'echo noted'],
        bidding: { strategy: 'ignore' },
      },
    },
  ]
    .map((d) => stringify(d))
    .join('---\n');
}
