import type {
  V1Container,
  V1EnvVar,
  V1PodTemplateSpec,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { AgentSpec, AgentVolume } from '../../api/agent.ts';
import type { HoltSpec } from '../../api/holt.ts';
import { pupEnvironment } from '../../api/pupenv.ts';
import { EGRESS_LABEL } from './networkpolicy.ts';
import { HOLT_BIN } from './orchestrator.ts';
import { containerSecurity, HEALTH_PORT, holtProbes, podSecurity, RUNTIME_UID, resourcesOf } from './pod.ts';
import { agentAccount } from './serviceaccount.ts';
import { storeEnv } from './stores.ts';
import {
  WORKSPACE_LABEL,
  WORKSPACE_PATH,
  waitForSeed,
  workspaceAffinity,
  workspaceClaim,
} from './workspace.ts';

export type PupMode = 'standard' | 'controller' | 'worker';

export interface PupPodInput {
  holt: string;
  holtSpec: HoltSpec;
  agent: AgentSpec & { role: string };
  mode: PupMode;
  runtimeImage: string;
  /** Image of the agent's tools; the pup is copied into it when it is not the runtime image. */
  image?: string;
  workspaceMode: 'ro' | 'rw';
  labels: Record<string, string>;
  args?: string[];
  extraEnv?: V1EnvVar[];
  terminationGracePeriodSeconds?: number;
  restartPolicy?: 'Always' | 'Never';
  /** The Agent's extra ConfigMap/Secret volumes, mounted read-only into the pup container. */
  volumes?: AgentVolume[];
}

/** The LLM key of an LLM agent, only ever as a secretKeyRef (the other settings are pupEnvironment's). */
function llmKeyEnv(agent: AgentSpec, holt: HoltSpec): V1EnvVar[] {
  const key = holt.llm?.apiKeySecretRef;
  if ((!agent.llm && !agent.bidding.llm) || !key) return [];
  return [{ name: 'HOLT_LLM_API_KEY', valueFrom: { secretKeyRef: { name: key.name, key: key.key } } }];
}

/** One entry a name: a pod spec with a name twice is refused by server-side apply at deploy time. */
export function assertUniqueEnv(env: V1EnvVar[]): V1EnvVar[] {
  const seen = new Set<string>();
  const twice = env.filter((e) => seen.size === seen.add(e.name).size).map((e) => e.name);
  if (twice.length) throw new Error(`environment variables set twice: ${[...new Set(twice)].join(', ')}`);
  return env;
}

/**
 * The pod of a pup in any mode: the pup's HOLT_* environment (shared with holt up), connection URLs
 * and the LLM key from Secrets, the workspace PVC read-only or read-write, the restricted security
 * profile, and /healthz, /readyz probes on the health port.
 */
export function pupPodTemplate(p: PupPodInput): V1PodTemplateSpec {
  const literal = pupEnvironment(p.agent, {
    instance: p.holt,
    role: p.agent.role,
    workspace: WORKSPACE_PATH,
    healthPort: HEALTH_PORT,
    mode: p.mode,
    llm: { baseUrl: p.holtSpec.llm?.baseUrl, model: p.holtSpec.llm?.model },
  });
  const env: V1EnvVar[] = assertUniqueEnv([
    ...Object.entries(literal).map(([name, value]) => ({ name, value })),
    ...p.agent.env
      .filter((e) => e.value === undefined && e.secretKeyRef)
      .map((e) => ({
        name: e.name,
        valueFrom: { secretKeyRef: { name: e.secretKeyRef!.name, key: e.secretKeyRef!.key } },
      })),
    ...storeEnv(p.holt, p.holtSpec.stores),
    ...llmKeyEnv(p.agent, p.holtSpec),
    { name: 'HOLT_POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    ...(p.extraEnv ?? []),
  ]);
  const image = p.image ?? p.runtimeImage;
  const copyPup = image !== p.runtimeImage;
  const mounts: V1VolumeMount[] = [
    { name: 'workspace', mountPath: WORKSPACE_PATH, readOnly: p.workspaceMode === 'ro' },
    { name: 'tmp', mountPath: '/tmp' },
    ...(copyPup ? [{ name: 'holt', mountPath: '/opt/holt', readOnly: true }] : []),
    ...(p.volumes ?? []).map((v) => ({ name: `x-${v.name}`, mountPath: v.mountPath, readOnly: true })),
  ];
  const volumes: V1Volume[] = [
    {
      name: 'workspace',
      persistentVolumeClaim: { claimName: workspaceClaim(p.holt), readOnly: p.workspaceMode === 'ro' },
    },
    { name: 'tmp', emptyDir: {} },
    ...(copyPup ? [{ name: 'holt', emptyDir: {} }] : []),
    // Prefixed so a user's volume name can never collide with ours.
    ...(p.volumes ?? []).map(
      (v): V1Volume =>
        v.configMap
          ? { name: `x-${v.name}`, configMap: { name: v.configMap } }
          : { name: `x-${v.name}`, secret: { secretName: v.secret } },
    ),
  ];
  const pup: V1Container = {
    name: 'pup',
    image,
    // In the runtime image its entrypoint (tini -- holt) stays PID 1, reaping the tools' orphans and
    // forwarding signals; in an agent's own image the copied launcher runs the pup itself.
    ...(copyPup ? { command: [HOLT_BIN, 'pup', ...(p.args ?? [])] } : { args: ['pup', ...(p.args ?? [])] }),
    env,
    ports: [{ name: 'http', containerPort: HEALTH_PORT }],
    ...holtProbes(),
    resources: resourcesOf(p.agent.resources, { requests: { cpu: '50m', memory: '128Mi' } }),
    securityContext: containerSecurity(),
    volumeMounts: mounts,
  };
  // The pup runs inside the agent's own image (its tools live there): an init container copies it in.
  const init: V1Container[] = copyPup
    ? [
        {
          name: 'install-pup',
          image: p.runtimeImage,
          command: ['cp', '-a', '/opt/holt/.', '/holt/'],
          resources: { requests: { cpu: '10m', memory: '32Mi' } },
          securityContext: containerSecurity(),
          volumeMounts: [{ name: 'holt', mountPath: '/holt' }],
        },
      ]
    : [];
  const lbls = {
    ...p.labels,
    'holt.io/role': p.agent.role,
    [WORKSPACE_LABEL]: p.holt,
    ...(p.agent.egress ? { [EGRESS_LABEL]: 'true' } : {}),
  };
  const affinity = workspaceAffinity(
    p.holt,
    p.holtSpec.workspace,
    p.mode === 'worker' ? p.labels : undefined,
  );
  init.push(...waitForSeed(p.holtSpec.workspace, p.runtimeImage));
  return {
    metadata: { labels: lbls },
    spec: {
      serviceAccountName: agentAccount(p.holt),
      automountServiceAccountToken: false,
      securityContext: podSecurity(RUNTIME_UID),
      ...(p.restartPolicy ? { restartPolicy: p.restartPolicy } : {}),
      ...(p.terminationGracePeriodSeconds
        ? { terminationGracePeriodSeconds: p.terminationGracePeriodSeconds }
        : {}),
      ...(affinity ? { affinity } : {}),
      ...(init.length ? { initContainers: init } : {}),
      containers: [pup],
      volumes,
    },
  };
}
