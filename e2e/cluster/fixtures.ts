import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { DEFAULT_RUNTIME_IMAGE } from '../../src/api/common.ts';
import { toolSecretName } from '../../src/operator/specs/tool-secrets.ts';
import type { ScriptedReply } from '../../test/harness/llm.ts';

/**
 * The e2e's own in-cluster servers, both on the runtime image (node + git): a Git server the Holt's
 * workspace is seeded from, with basic auth, and the scripted OpenAI-compatible server (the one test
 * double). Restricted pods, like the Holt's own.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const file = (...p: string[]) => readFileSync(join(ROOT, ...p), 'utf8');

export const GIT_USER = 'holt-e2e';
export const GIT_SECRET = 'e2e-git-credentials';

/** A Deployment + Service of `command` on the runtime image, `files` mounted under /srv/app (a key
 * with `/` becomes a path: ConfigMap keys cannot hold one, so they are stored with `__` instead). */
function server(
  name: string,
  command: string[],
  files: Record<string, string>,
  env: object[] = [],
  podLabels: Record<string, string> = {},
): object[] {
  const data = Object.fromEntries(Object.entries(files).map(([k, v]) => [k.replaceAll('/', '__'), v]));
  const items = Object.keys(files).map((k) => ({ key: k.replaceAll('/', '__'), path: k }));
  const labels = { app: name };
  return [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels: { ...labels, ...podLabels } },
          spec: {
            automountServiceAccountToken: false,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65532,
              seccompProfile: { type: 'RuntimeDefault' },
            },
            containers: [
              {
                name,
                image: DEFAULT_RUNTIME_IMAGE,
                imagePullPolicy: 'IfNotPresent',
                command,
                env: [{ name: 'HOME', value: '/tmp' }, ...env],
                ports: [{ name: 'http', containerPort: 8080 }],
                readinessProbe: { tcpSocket: { port: 'http' }, periodSeconds: 1 },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ['ALL'] },
                },
                volumeMounts: [
                  { name: 'files', mountPath: '/srv/app', readOnly: true },
                  { name: 'data', mountPath: '/srv/git' },
                  { name: 'tmp', mountPath: '/tmp' },
                ],
              },
            ],
            volumes: [
              { name: 'files', configMap: { name, items } },
              { name: 'data', emptyDir: {} },
              { name: 'tmp', emptyDir: {} },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, labels },
      spec: { selector: labels, ports: [{ name: 'http', port: 8080, targetPort: 'http' }] },
    },
  ];
}

/**
 * The Git server (`git` Service, port 8080) and its credentials Secret. Each repository is seeded with
 * the files given for it (repository-relative path → content).
 */
export function gitServer(password: string, repos: Record<string, Record<string, string>>): string {
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: GIT_SECRET },
    stringData: { username: GIT_USER, password },
  };
  const fromSecret = (name: string, key: string) => ({
    name,
    valueFrom: { secretKeyRef: { name: GIT_SECRET, key } },
  });
  const seeds = Object.fromEntries(
    Object.entries(repos).flatMap(([repo, files]) =>
      Object.entries(files).map(([p, v]) => [`seed/${repo}/${p}`, v]),
    ),
  );
  const docs = server(
    'git',
    ['/opt/holt/bin/node', '/srv/app/git-server.mjs'],
    { 'git-server.mjs': file('e2e/cluster/git-server.mjs'), ...seeds },
    [
      fromSecret('GIT_USER', 'username'),
      fromSecret('GIT_PASSWORD', 'password'),
      { name: 'GIT_REPOS', value: Object.keys(repos).join(',') },
    ],
  );
  return [secret, ...docs].map((d) => stringify(d)).join('---\n');
}

/** The scripted LLM (`name` Service, base URL http://<name>:8080/v1), replying `script` in order. */
export function llmServer(script: ScriptedReply[], name = 'llm'): string {
  const docs = server(name, ['/opt/holt/bin/node', '/srv/app/e2e/cluster/llm-server.ts'], {
    'test/harness/llm.ts': file('test/harness/llm.ts'),
    'e2e/cluster/llm-server.ts': file('e2e/cluster/llm-server.ts'),
    'script.json': JSON.stringify(script),
  });
  return docs.map((d) => stringify(d)).join('---\n');
}

/**
 * A plain TCP server (`name` Service, port 8080) that also carries the network probe, so a control
 * run from it (no NetworkPolicy selects it) shows what is reachable at all.
 */
export function tcpTarget(name: string): string {
  // A probe that connects and resets (the readiness check) must not bring the server down.
  const code = "require('node:net').createServer((s) => s.on('error', () => {}).end('hi\\n')).listen(8080)";
  const docs = server(name, ['/opt/holt/bin/node', '-e', code], {
    'net-probe.mjs': file('e2e/probe/net-probe.mjs'),
  });
  return docs.map((d) => stringify(d)).join('---\n');
}

/**
 * examples/living/tool-service.mjs answering `tool` for Holt `holt`: its pod carries the Holt's instance
 * label (so the Holt's policies admit it to NATS, and nothing else) and the `tool` user's URL only.
 */
export function toolService(holt: string, tool: string): string {
  const docs = server(
    'builds',
    ['/opt/holt/bin/node', '/srv/app/tool-service.mjs', tool],
    { 'tool-service.mjs': file('examples/living/tool-service.mjs') },
    [
      // The tool's own NATS user (the operator's Secret <holt>-tool-<name>): it hears that tool only.
      { name: 'NATS_URL', valueFrom: { secretKeyRef: { name: toolSecretName(holt, tool), key: 'url' } } },
      {
        name: 'HOLT_INSTANCE',
        valueFrom: { secretKeyRef: { name: toolSecretName(holt, tool), key: 'instance' } },
      },
      { name: 'HOLT_APP_PACKAGE', value: '/opt/holt/app/package.json' },
      { name: 'HEALTH_PORT', value: '8080' },
    ],
    { 'holt.io/instance': holt },
  );
  return docs.map((d) => stringify(d)).join('---\n');
}
