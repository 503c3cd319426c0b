import type {
  V1Container,
  V1EnvVar,
  V1HostAlias,
  V1PodTemplateSpec,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { AgentSpec, AgentVolume } from '../../api/agent.ts';
import type { HoltSpec } from '../../api/holt.ts';
import { mcpHeaderVars, pupEnvironment } from '../../api/pupenv.ts';
import type { PupMode } from '../../blackboard/pup-mode.ts';
import { CONTRACT_ENV, TOOL_ENV_NAMES } from '../../common/secrets.ts';
import { DNS_LABEL, dnsDenied, EGRESS_LABEL, storeHostAliases } from './networkpolicy.ts';
import { HOLT_BIN } from './orchestrator.ts';
import {
  bundleCopyContainer,
  containerSecurity,
  execProbe,
  HEALTH_PORT,
  holtProbes,
  podSecurity,
  RUNTIME_UID,
  resourcesOf,
  scrapeAnnotations,
} from './pod.ts';
import { agentAccount } from './serviceaccount.ts';
import { type StoreKind, storeEnv, storeTlsClient } from './stores.ts';
import { toolServerLabels } from './toolserver.ts';
import { tracingEnv } from './tracing.ts';
import {
  WORKSPACE_LABEL,
  WORKSPACE_PATH,
  waitForSeed,
  workspaceAffinity,
  workspaceClaim,
} from './workspace.ts';

/** The socket the pup asks the agent container's runner to run tools on (an emptyDir both mount). */
export const RUNNER_DIR = '/run/holt-runner';
export const RUNNER_SOCKET = `${RUNNER_DIR}/runner.sock`;

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
  /** The Holt's namespace and its store Services' cluster IPs, for pods without DNS (dnsDenied). */
  stores?: StoreAddresses;
}

/** Where a Holt's bundled stores are, for the /etc/hosts of pods that go without DNS. */
export interface StoreAddresses {
  namespace: string;
  clusterIps: Partial<Record<StoreKind, string>>;
  /** The trace collector's Service address, when `spec.tracing.endpoint` names one (`name.ns.svc`). */
  collector?: { host: string; ip: string };
}

/** The hosts entries of a pod without DNS, or undefined when it keeps DNS. */
function noDnsOf(p: PupPodInput): { hostAliases: V1HostAlias[] } | undefined {
  if (!dnsDenied(p.agent, p.holtSpec.stores)) return undefined;
  const collector = p.stores?.collector;
  return {
    hostAliases: [
      ...(p.stores ? storeHostAliases(p.holt, p.stores.namespace, p.stores.clusterIps) : []),
      ...(collector ? [{ ip: collector.ip, hostnames: [collector.host] }] : []),
    ],
  };
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
  const declared = new Set(p.agent.env.map((e) => e.name));
  // A remote MCP server's headers (its tokens): the pup's alone, never the agent container's.
  const headerVars = new Set(mcpHeaderVars(p.agent));
  const userVar = (e: AgentSpec['env'][number]): V1EnvVar =>
    e.value !== undefined
      ? { name: e.name, value: e.value }
      : {
          name: e.name,
          valueFrom: { secretKeyRef: { name: e.secretKeyRef!.name, key: e.secretKeyRef!.key } },
        };
  // The stores' CA for the pup container only (the agent container talks to no store).
  const tls = storeTlsClient(p.holtSpec.stores);
  const contract = Object.entries(literal).filter(([k]) => CONTRACT_ENV.includes(k) || k === TOOL_ENV_NAMES);
  // The pup: stores, model key, bidding, results. No user variable: those are for the tools.
  const env: V1EnvVar[] = assertUniqueEnv([
    ...Object.entries(literal)
      .filter(([name]) => !declared.has(name))
      .map(([name, value]) => ({ name, value })),
    ...storeEnv(p.holt, p.holtSpec.stores, 'pup'),
    ...tls.env,
    ...tracingEnv(p.holtSpec.tracing),
    ...llmKeyEnv(p.agent, p.holtSpec),
    { name: 'HOLT_POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'HOLT_TOOL_RUNNER_SOCKET', value: RUNNER_SOCKET },
    ...p.agent.env.filter((e) => headerVars.has(e.name)).map(userVar),
    ...(p.extraEnv ?? []),
  ]);
  // The tools' side: the contract and what the agent declares, never a store or model credential.
  const toolEnv: V1EnvVar[] = assertUniqueEnv([
    ...contract.map(([name, value]) => ({ name, value })),
    ...p.agent.env.filter((e) => !headerVars.has(e.name)).map(userVar),
  ]);
  const image = p.image ?? p.runtimeImage;
  const copyRunner = image !== p.runtimeImage;
  const workspace = (readOnly: boolean): V1VolumeMount => ({
    name: 'workspace',
    mountPath: WORKSPACE_PATH,
    readOnly,
  });
  const runnerDir: V1VolumeMount = { name: 'runner', mountPath: RUNNER_DIR };
  const volumes: V1Volume[] = [
    {
      name: 'workspace',
      persistentVolumeClaim: { claimName: workspaceClaim(p.holt), readOnly: p.workspaceMode === 'ro' },
    },
    { name: 'tmp', emptyDir: {} },
    { name: 'pup-tmp', emptyDir: {} },
    { name: 'runner', emptyDir: {} },
    ...tls.volumes,
    ...(copyRunner ? [{ name: 'holt', emptyDir: {} }] : []),
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
    image: p.runtimeImage,
    // The runtime image's entrypoint (tini -- holt) stays PID 1, forwarding signals.
    args: ['pup', ...(p.args ?? [])],
    env,
    ports: [{ name: 'http', containerPort: HEALTH_PORT }],
    ...holtProbes(),
    resources: { requests: { cpu: '50m', memory: '128Mi' } },
    securityContext: containerSecurity(),
    // The pup reads the workspace (commit checks) and never writes it.
    volumeMounts: [workspace(true), { name: 'pup-tmp', mountPath: '/tmp' }, runnerDir, ...tls.mounts],
  };
  // The agent's container: its own image (its tools live there) or the runtime image, running the
  // tool runner as a native sidecar, so a Job's pod completes when the pup does.
  const runner: V1Container = {
    name: 'agent',
    image,
    restartPolicy: 'Always',
    ...(copyRunner
      ? { command: [HOLT_BIN, 'tool-runner', '--socket', RUNNER_SOCKET] }
      : { args: ['tool-runner', '--socket', RUNNER_SOCKET] }),
    env: toolEnv,
    resources: resourcesOf(p.agent.resources, { requests: { cpu: '50m', memory: '128Mi' } }),
    securityContext: containerSecurity(),
    startupProbe: execProbe(['test', '-S', RUNNER_SOCKET], 1, 60),
    volumeMounts: [
      workspace(p.workspaceMode === 'ro'),
      { name: 'tmp', mountPath: '/tmp' },
      runnerDir,
      ...(copyRunner ? [{ name: 'holt', mountPath: '/opt/holt', readOnly: true }] : []),
      ...(p.volumes ?? []).map((v) => ({ name: `x-${v.name}`, mountPath: v.mountPath, readOnly: true })),
    ],
  };
  // In an agent's own image the runner comes from the runtime image's bundle (Node included).
  const init: V1Container[] = copyRunner
    ? [bundleCopyContainer('install-runner', p.runtimeImage, 'holt')]
    : [];
  const noDns = noDnsOf(p);
  const lbls = {
    ...p.labels,
    'holt.io/role': p.agent.role,
    [WORKSPACE_LABEL]: p.holt,
    ...(p.agent.egress ? { [EGRESS_LABEL]: 'true' } : {}),
    ...(noDns ? { [DNS_LABEL]: 'deny' } : {}),
    // Its ToolServers' policies admit pods with these (and let them reach the servers).
    ...toolServerLabels(p.agent.llm?.toolServers),
  };
  const affinity = workspaceAffinity(
    p.holt,
    p.holtSpec.workspace,
    p.mode === 'worker' ? p.labels : undefined,
  );
  init.push(...waitForSeed(p.holtSpec.workspace, p.runtimeImage), runner);
  return {
    metadata: { labels: lbls, annotations: scrapeAnnotations() },
    spec: {
      serviceAccountName: agentAccount(p.holt),
      automountServiceAccountToken: false,
      securityContext: podSecurity(RUNTIME_UID),
      ...(p.restartPolicy ? { restartPolicy: p.restartPolicy } : {}),
      ...(p.terminationGracePeriodSeconds
        ? { terminationGracePeriodSeconds: p.terminationGracePeriodSeconds }
        : {}),
      ...(affinity ? { affinity } : {}),
      // No resolver (the Holt's DNS policy leaves these pods out): the stores are in /etc/hosts, and any
      // other lookup fails at once on the loopback instead of waiting for a query the policy drops.
      ...(noDns
        ? {
            hostAliases: noDns.hostAliases,
            dnsPolicy: 'None',
            dnsConfig: { nameservers: ['127.0.0.1'] },
          }
        : {}),
      ...(init.length ? { initContainers: init } : {}),
      containers: [pup],
      volumes,
    },
  };
}
