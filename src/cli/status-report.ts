import type { CoreV1Api } from '@kubernetes/client-node';
import { API_VERSION } from '../api/common.ts';
import { type AgentStatus, readAgentStatuses } from '../blackboard/agent-status.ts';
import { Blackboard } from '../blackboard/client.ts';
import { type McpStatusReport, readMcpStatuses } from '../blackboard/mcp-status.ts';
import { readQuarantine } from '../blackboard/quarantine.ts';
import { getAgents } from '../blackboard/registry.ts';
import { type RetentionReport, readRetentionReport } from '../blackboard/retention-report.ts';
import type { Claim, Quarantined } from '../blackboard/types.ts';
import { redactUrl } from '../common/logger.ts';
import { effectiveStatus, type InstanceState } from '../local/instance.ts';
import { traceIdOf } from '../telemetry/carrier.ts';
import type { KubeHolt } from './kube.ts';
import { resolveInstance } from './resolve.ts';

// What `holt status` knows of a Holt, without printing: the command prints it for a person (or as
// --json), `holt mcp` returns the same JSON to an MCP client.

/** A local instance: its state file, and what its blackboard says when it runs. */
export interface LocalStatus {
  state: InstanceState;
  status: InstanceState['status'];
  claims: Record<string, number>;
  dormant: Claim[];
  llm: Map<string, AgentStatus>;
  /** Each LLM agent's MCP servers as its pup last reported them. */
  mcp: Map<string, McpStatusReport>;
  quarantined: Quarantined[];
  retention: RetentionReport | null;
}

export async function localStatus(name?: string): Promise<LocalStatus> {
  const s = resolveInstance(name, { mustRun: false });
  const st = effectiveStatus(s);
  const r: LocalStatus = {
    state: s,
    status: st,
    claims: {},
    dormant: [],
    llm: new Map(),
    mcp: new Map(),
    quarantined: [],
    retention: null,
  };
  if (st !== 'running' && st !== 'degraded') return r;
  const bb = Blackboard.connect(s.redisUrl!, s.name, { maxRetriesPerRequest: 1 });
  try {
    await countClaims(bb, r);
    const roles = (await getAgents(bb)).agents.map((a) => a.role);
    r.llm = await readAgentStatuses(bb.redis, s.name, roles);
    r.mcp = await readMcpStatuses(bb.redis, s.name, roles);
    r.quarantined = await readQuarantine(bb);
    // A malformed report is shown as missing: status must never fail on it.
    r.retention = await readRetentionReport(bb.redis, bb.k.retention).catch(() => null);
  } finally {
    await bb.close();
  }
  return r;
}

async function countClaims(bb: Blackboard, r: { claims: Record<string, number>; dormant: Claim[] }) {
  for (const c of await bb.getClaims(await bb.listClaimIds())) {
    if (c) r.claims[c.claim.status] = (r.claims[c.claim.status] ?? 0) + 1;
    if (c?.claim.dormant_reason) r.dormant.push(c.claim);
  }
}

const dormantView = (c: Claim) => ({
  claim_id: c.id,
  artefact_id: c.artefact_id,
  reason: c.dormant_reason ?? '',
  silent_agents: c.silent_agents ?? [],
  trace_id: traceIdOf(c) ?? null,
});

/** `holt status --json`. The state holds the stores' admin URLs: their passwords are redacted. */
export function localStatusJson(r: LocalStatus): Record<string, unknown> {
  const s = r.state;
  const urls = { redisUrl: s.redisUrl, natsUrl: s.natsUrl, postgresUrl: s.postgresUrl };
  const redacted = Object.fromEntries(Object.entries(urls).map(([k, v]) => [k, v && redactUrl(v)]));
  return {
    ...s,
    ...redacted,
    status: r.status,
    claims: r.claims,
    dormant: r.dormant.map(dormantView),
    llm_agents: Object.fromEntries(r.llm),
    mcp_servers: Object.fromEntries(r.mcp),
    quarantined: r.quarantined,
    retention: r.retention,
  };
}

/** A Holt in a cluster: its resource's status, its pods (rows), its claims. */
export interface KubeStatus {
  holt: {
    status?: {
      phase?: string;
      observedGeneration?: number;
      agents?: { total?: number; ready?: number };
      conditions?: { type: string; status: string; reason?: string; message?: string }[];
    };
  };
  /** POD, READY, STATUS, RESTARTS, NODE. */
  pods: string[][];
  claims: Record<string, number>;
  dormant: Claim[];
  /** Each LLM agent's MCP servers as its pup last reported them (ToolServers' included). */
  mcp: Map<string, McpStatusReport>;
}

export async function kubeStatusReport(k: KubeHolt): Promise<KubeStatus> {
  // Loaded here: a local `holt mcp` (started by an IDE) should not wait for the Kubernetes client.
  const { CoreV1Api, CustomObjectsApi } = await import('@kubernetes/client-node');
  const { apiError } = await import('./kube.ts');
  const [group, version] = API_VERSION.split('/') as [string, string];
  let holt: KubeStatus['holt'];
  let pods: Awaited<ReturnType<CoreV1Api['listNamespacedPod']>>['items'];
  try {
    holt = (await k.kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group,
      version,
      namespace: k.namespace,
      plural: 'holts',
      name: k.name,
    })) as KubeStatus['holt'];
    pods = (
      await k.kc
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: k.namespace, labelSelector: `holt.io/instance=${k.name}` })
    ).items;
  } catch (e) {
    throw apiError(e, `Holt ${k.namespace}/${k.name}`);
  }
  const r: KubeStatus = { holt, pods: [], claims: {}, dormant: [], mcp: new Map() };
  const bb = Blackboard.connect(k.redisUrl, k.name, { ...k.redisOptions, maxRetriesPerRequest: 1 });
  try {
    await countClaims(bb, r);
    const roles = (await getAgents(bb)).agents.map((a) => a.role);
    r.mcp = await readMcpStatuses(bb.redis, k.name, roles);
  } finally {
    await bb.close();
  }
  r.pods = pods.map((p) => {
    const cs = p.status?.containerStatuses ?? [];
    return [
      p.metadata?.name ?? '',
      `${cs.filter((c) => c.ready).length}/${cs.length}`,
      p.metadata?.deletionTimestamp ? 'Terminating' : (p.status?.phase ?? ''),
      String(cs.reduce((n, c) => n + c.restartCount, 0)),
      p.spec?.nodeName ?? '',
    ];
  });
  return r;
}

/** `holt --kube … status --json`. */
export function kubeStatusJson(k: KubeHolt, r: KubeStatus): Record<string, unknown> {
  return {
    namespace: k.namespace,
    name: k.name,
    status: r.holt.status ?? {},
    pods: r.pods,
    claims: r.claims,
    dormant: r.dormant.map(dormantView),
    mcp_servers: Object.fromEntries(r.mcp),
  };
}
