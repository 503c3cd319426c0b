import type { V1Affinity, V1Container } from '@kubernetes/client-node';
import type { HoltSpec } from '../../api/holt.ts';
import { hashOf } from '../kube/apply.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';
import { EGRESS_LABEL } from './networkpolicy.ts';
import { containerSecurity, podSecurity, RUNTIME_UID } from './pod.ts';
import { agentAccount } from './serviceaccount.ts';

export const workspaceClaim = (holt: string) => childName(holt, 'workspace');
export const WORKSPACE_PATH = '/workspace';
/** On every pod that mounts a Holt's workspace (placement rules select it). */
export const WORKSPACE_LABEL = 'holt.io/workspace';
const GIT_CREDENTIALS_PATH = '/var/run/holt/git';

/** The shared workspace PVC the agents mount read-only or read-write. */
export function workspacePvc(owner: Owner, ws: HoltSpec['workspace']): KubeObject {
  const name = workspaceClaim(owner.name);
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: meta(name, owner, labels(owner.name, name, 'workspace')),
    spec: {
      accessModes: [ws.accessMode],
      resources: { requests: { storage: ws.size } },
      ...(ws.storageClassName ? { storageClassName: ws.storageClassName } : {}),
    },
  };
}

/**
 * Where a pod that mounts the workspace may run. A ReadWriteOnce volume attaches to one node, so every
 * such pod of the Holt goes where the others are (required pod affinity on the workspace label; the
 * scheduler places the first one freely, since it matches its own term). A ReadWriteMany volume goes
 * anywhere: `spread` (a worker pool's own pod labels) then asks for its pods on different nodes.
 */
export function workspaceAffinity(
  holt: string,
  ws: HoltSpec['workspace'],
  spread?: Record<string, string>,
): V1Affinity | undefined {
  const hostname = 'kubernetes.io/hostname';
  if (ws.accessMode === 'ReadWriteOnce')
    return {
      podAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: { [WORKSPACE_LABEL]: holt } }, topologyKey: hostname },
        ],
      },
    };
  if (!spread) return undefined;
  return {
    podAntiAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        { weight: 100, podAffinityTerm: { labelSelector: { matchLabels: spread }, topologyKey: hostname } },
      ],
    },
  };
}

/**
 * With `gitUrl`, pods that mount the workspace wait in this init container until the seed Job has
 * cloned it (an agent started on an empty workspace would fail its first claim for nothing).
 */
export function waitForSeed(ws: HoltSpec['workspace'], image: string): V1Container[] {
  if (!ws.gitUrl) return [];
  return [
    {
      name: 'wait-for-workspace',
      image,
      command: [
        'sh',
        '-c',
        `until [ -e ${WORKSPACE_PATH}/.git ]; do echo "waiting for the workspace to be cloned from its gitUrl"; sleep 2; done`,
      ],
      resources: { requests: { cpu: '5m', memory: '16Mi' } },
      securityContext: containerSecurity(),
      volumeMounts: [{ name: 'workspace', mountPath: WORKSPACE_PATH, readOnly: true }],
    },
  ];
}

// The clone goes through a side directory, so a volume root holding lost+found can still be seeded.
// Credentials reach git through GIT_ASKPASS from the mounted Secret: never in the URL, the repository's
// config, argv or the environment.
const SEED_SCRIPT = `set -eu
cd ${WORKSPACE_PATH}
if [ -e .git ]; then echo "the workspace is already a git repository: left as it is"; exit 0; fi
for f in * .[!.]*; do
  case "$f" in '*'|'.[!.]*'|lost+found|.holt-seed) ;; *) echo "the workspace holds $f but no .git: not cloning over it" >&2; exit 1 ;; esac
done
if [ -r ${GIT_CREDENTIALS_PATH}/password ]; then
  printf '#!/bin/sh\\ncase "$1" in Username*) cat ${GIT_CREDENTIALS_PATH}/username ;; *) cat ${GIT_CREDENTIALS_PATH}/password ;; esac\\n' >/tmp/askpass
  chmod 0700 /tmp/askpass
  export GIT_ASKPASS=/tmp/askpass
fi
rm -rf .holt-seed
git clone --quiet "$HOLT_GIT_URL" .holt-seed
mv .holt-seed/.git .git
rm -rf .holt-seed
git reset --quiet --hard
git config user.name "Holt $HOLT_INSTANCE_NAME"
git config user.email "holt@$HOLT_INSTANCE_NAME.holt.local"
echo "cloned $(git rev-parse --short HEAD) into the workspace"
`;

/**
 * The Job that seeds the workspace from `gitUrl` once: an empty workspace is cloned, one that is
 * already a repository is left alone (so a re-run, or a changed URL, never overwrites work). Its
 * name carries a hash of what it clones, as the migration Job's does; the finished Job stays as the
 * record (Holt condition WorkspaceSeeded).
 */
export function workspaceSeedJob(owner: Owner, spec: HoltSpec, runtimeImage: string): KubeObject | undefined {
  const ws = spec.workspace;
  if (!ws.gitUrl) return undefined;
  const image = spec.runtimeImage ?? runtimeImage;
  const secret = ws.gitSecretRef?.name;
  const name = childName(owner.name, 'seed', hashOf({ image, url: ws.gitUrl, secret }).slice(0, 8));
  const lbls = labels(owner.name, childName(owner.name, 'seed'), 'workspace-seed', {
    [WORKSPACE_LABEL]: owner.name,
    // The clone reaches outside the Holt (the default-deny policy lets only egress-labelled pods out).
    [EGRESS_LABEL]: 'true',
  });
  const affinity = workspaceAffinity(owner.name, ws);
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: meta(name, owner, lbls),
    spec: {
      backoffLimit: 6,
      template: {
        metadata: { labels: lbls },
        spec: {
          restartPolicy: 'OnFailure',
          serviceAccountName: agentAccount(owner.name),
          automountServiceAccountToken: false,
          securityContext: podSecurity(RUNTIME_UID),
          ...(affinity ? { affinity } : {}),
          containers: [
            {
              name: 'seed',
              image,
              command: ['sh', '-c', SEED_SCRIPT],
              env: [
                { name: 'HOLT_GIT_URL', value: ws.gitUrl },
                { name: 'HOLT_INSTANCE_NAME', value: owner.name },
                { name: 'HOME', value: '/tmp' },
                { name: 'GIT_TERMINAL_PROMPT', value: '0' },
              ],
              resources: { requests: { cpu: '20m', memory: '64Mi' } },
              securityContext: containerSecurity(),
              volumeMounts: [
                { name: 'workspace', mountPath: WORKSPACE_PATH },
                { name: 'tmp', mountPath: '/tmp' },
                ...(secret
                  ? [{ name: 'git-credentials', mountPath: GIT_CREDENTIALS_PATH, readOnly: true }]
                  : []),
              ],
            },
          ],
          volumes: [
            { name: 'workspace', persistentVolumeClaim: { claimName: workspaceClaim(owner.name) } },
            { name: 'tmp', emptyDir: {} },
            ...(secret
              ? [{ name: 'git-credentials', secret: { secretName: secret, defaultMode: 0o440 } }]
              : []),
          ],
        },
      },
    },
  };
}
