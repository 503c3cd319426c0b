import type { AgentSpec } from '../../api/agent.ts';
import { ToolServerSpec, toolServerForm } from '../../api/toolserver.ts';
import type { ReconcileResult } from '../kube/queue.ts';
import { ownerOf } from '../specs/meta.ts';
import {
  type ResolvedToolServer,
  resolveToolServers,
  type ToolServerView,
  toolServerChild,
  toolServerObjects,
  toolServerUrl,
} from '../specs/toolserver.ts';
import { applyChildren, type ControllerContext, readinessReporter, workloadReady } from './context.ts';
import { splitKey } from './resources.ts';
import { type Discovery, discoverTools } from './toolserver-discovery.ts';

/** How often a ToolServer's tools are read again (they change without a Kubernetes event). */
export const TOOLSERVER_REFRESH_MS = 60_000;

/** The last discovery of each ToolServer (key → its url, generation, time and result). */
const discoveries = new Map<string, { url: string; gen: number | undefined; at: number; d: Discovery }>();

/** The last tools discovered for a ToolServer, for the Agents that reference it. */
export function lastDiscovery(namespace: string, name: string): Discovery | undefined {
  return discoveries.get(`${namespace}/${name}`)?.d;
}

/**
 * A ToolServer: its Deployment, Service and NetworkPolicy (none for a url), then its tools, read by
 * connecting through the Service (or to the url) at most every refresh interval and on a spec change.
 * Status: `url`, `tools`, and Ready with why it is not (an invalid spec, the pod not ready, unreachable).
 */
export async function reconcileToolServer(ctx: ControllerContext, key: string): Promise<ReconcileResult> {
  const [ns, name] = splitKey(key);
  const obj = ctx.cache.get('ToolServer', ns, name);
  if (!obj || obj.metadata.deletionTimestamp) {
    discoveries.delete(key);
    return undefined;
  }
  const status = readinessReporter(ctx, obj);
  const parsed = ToolServerSpec.safeParse(obj.spec);
  if (!parsed.success) {
    const msg = parsed.error.issues.map((i) => `${i.path.join('.') || 'spec'}: ${i.message}`).join('; ');
    await status('Failed', false, 'InvalidSpec', msg.slice(0, 1000), {});
    return undefined;
  }
  const spec = parsed.data;
  const owner = ownerOf(obj);
  const res = await applyChildren(
    ctx,
    owner.uid,
    ns,
    toolServerObjects(owner, spec, ctx.runtimeImage, ctx.network, clusterIpOf(ctx, ns, name)),
    ['Deployment', 'Service', 'NetworkPolicy'],
  );
  const url = toolServerUrl(name, ns, spec);
  if (res.errors.length) {
    await status('Degraded', false, 'ApplyFailed', res.errors.join('; ').slice(0, 1000), { url });
    throw new Error(`toolserver ${key}: ${res.errors.join('; ')}`);
  }
  const refreshMs = ctx.toolServerRefreshMs ?? TOOLSERVER_REFRESH_MS;
  if (toolServerForm(spec) !== 'external') {
    const w = workloadReady(ctx.cache.get('Deployment', ns, toolServerChild(name)));
    if (!w.ready) {
      await status('Progressing', false, w.reason, `waiting for the server's pod: ${w.reason}`, { url });
      return { requeueAfterMs: refreshMs };
    }
  }
  const gen = obj.metadata.generation;
  let last = discoveries.get(key);
  if (!last || last.url !== url || last.gen !== gen || Date.now() - last.at >= refreshMs) {
    last = { url, gen, at: Date.now(), d: await discoverTools(url) };
    discoveries.set(key, last);
  }
  const when = new Date(last.at).toISOString();
  if (!last.d.ok) {
    await status('Degraded', false, 'Unreachable', last.d.reason, { url, lastDiscoveryTime: when });
  } else {
    const n = last.d.tools.length;
    await status('Ready', true, 'ToolsListed', `${n} tool${n === 1 ? '' : 's'} at ${url}`, {
      url,
      tools: last.d.tools,
      lastDiscoveryTime: when,
    });
  }
  return { requeueAfterMs: Math.max(1, last.at + refreshMs - Date.now()) };
}

const clusterIpOf = (ctx: ControllerContext, ns: string, name: string) =>
  (ctx.cache.get('Service', ns, toolServerChild(name))?.spec as { clusterIP?: string } | undefined)
    ?.clusterIP;

/** A referenced ToolServer as the cache holds it (its status is the ToolServer reconcile's). */
function viewOf(ctx: ControllerContext, ns: string, name: string): ToolServerView | undefined {
  const obj = ctx.cache.get('ToolServer', ns, name);
  if (!obj || obj.metadata.deletionTimestamp) return undefined;
  const parsed = ToolServerSpec.safeParse(obj.spec);
  if (!parsed.success)
    return { invalid: parsed.error.issues[0]?.message ?? 'invalid', ready: false, message: '' };
  const st = (obj.status ?? {}) as {
    tools?: { name: string }[];
    conditions?: { type: string; status: string; message?: string }[];
  };
  const r = st.conditions?.find((c) => c.type === 'Ready');
  return {
    spec: parsed.data,
    clusterIp: clusterIpOf(ctx, ns, name),
    ready: r?.status === 'True',
    message: r?.message ?? 'not yet reconciled',
    ...(st.tools ? { tools: st.tools.map((t) => t.name) } : {}),
  };
}

/**
 * An Agent's spec with its ToolServers added to its MCP servers (what its pups are given), and how
 * each resolved, for its status. Without toolServers the spec is returned as it is.
 */
export function withToolServers<A extends Pick<AgentSpec, 'llm'>>(
  ctx: ControllerContext,
  ns: string,
  a: A,
): { spec: A; toolServers: ResolvedToolServer[] } {
  const refs = a.llm?.toolServers ?? [];
  if (!a.llm || !refs.length) return { spec: a, toolServers: [] };
  const r = resolveToolServers(refs, (name) => viewOf(ctx, ns, name));
  return {
    spec: { ...a, llm: { ...a.llm, mcpServers: [...a.llm.mcpServers, ...r.servers] } },
    toolServers: r.status,
  };
}

/** The status note of an Agent whose ToolServers are not all usable: each named, with why. */
export function toolServerNote(ts: ResolvedToolServer[]): string {
  const bad = ts.filter((t) => !t.ready);
  return bad.length ? `; ToolServer ${bad.map((t) => `${t.name}: ${t.message}`).join('; ')}` : '';
}
