import { newToken } from '../../access/tokens.ts';
import type { HoltSpec } from '../../api/holt.ts';
import { applyIfChanged } from '../kube/apply.ts';
import { isConflict, isNotFound, type KubeObject } from '../kube/kube.ts';
import { type ConditionInput, condition } from '../kube/status.ts';
import {
  type AgentToken,
  agentTokenSecret,
  agentTokens,
  type ConsoleToken,
  consoleTokenSecret,
  ingressExposure,
  ingressName,
  ingressTokensSecret,
  ingressTokensSecretName,
  tokenFileOf,
} from '../specs/ingress.ts';
import { type Owner, ownerOf } from '../specs/meta.ts';
import type { ControllerContext } from './context.ts';
import { holtOf, parseAgent } from './resources.ts';

/**
 * Whether an Agent of the Holt enables spec.ingress (the console may serve the port too) and the tokens its Agents
 * declare (from the cache; an Agent with an invalid spec declares none).
 */
export function holtIngress(
  ctx: ControllerContext,
  namespace: string,
  holt: string,
): { serving: boolean; tokens: AgentToken[] } {
  const specs = ctx.cache
    .list('Agent', namespace)
    .filter((a) => holtOf(a) === holt && !a.metadata.deletionTimestamp)
    .flatMap((a) => {
      const p = parseAgent(a);
      return p.ok && p.spec.ingress?.enabled ? [{ name: a.metadata.name, spec: p.spec }] : [];
    });
  return {
    serving: specs.length > 0,
    tokens: specs.flatMap((a) => agentTokens(a.name, a.spec.role ?? a.name, a.spec)),
  };
}

/** The token a Secret holds (key `token`), or undefined when it holds none. */
export const tokenOf = (s: KubeObject | undefined): string | undefined => {
  const v = (s as { data?: Record<string, string> } | undefined)?.data?.token;
  return v ? Buffer.from(v, 'base64').toString('utf8').trim() || undefined : undefined;
};

/**
 * The token a Secret holds, making the Secret first (with a new random token) when the operator manages
 * it and it is missing; undefined while a user's Secret is missing or holds none.
 */
async function tokenIn(
  ctx: ControllerContext,
  namespace: string,
  t: { secretName: string; managed: boolean },
  make: () => KubeObject | undefined,
  created: string[],
): Promise<string | undefined> {
  let live = await ctx.client.get('Secret', namespace, t.secretName);
  if (!live && t.managed) {
    const secret = make();
    if (!secret) return undefined;
    try {
      await ctx.client.create(secret);
      created.push(`Secret/${t.secretName}`);
    } catch (e) {
      if (!isConflict(e)) throw e; // made by an earlier pass our read missed: read it
    }
    live = await ctx.client.get('Secret', namespace, t.secretName);
  }
  return tokenOf(live);
}

/**
 * The tokens' Secrets (made for the tokens that bring none; a user's own Secret is only read) and the
 * Holt's hashed token file, rewritten when the tokens change: the Agents' tokens and the console's. A
 * deleted operator-made Secret is made again with a new token: the old one stops working (revoked)
 * once the kubelet refreshes the file. Returns the tokens present and those whose Secret is missing
 * (the user's, not yet created).
 */
export async function syncIngressTokens(
  ctx: ControllerContext,
  owner: Owner,
  tokens: AgentToken[],
  consoleTokens: ConsoleToken[] = [],
): Promise<{ present: AgentToken[]; missing: { secretName: string }[]; created: string[] }> {
  const present: (AgentToken & { token: string })[] = [];
  const presentConsole: (ConsoleToken & { token: string })[] = [];
  const missing: { secretName: string }[] = [];
  const created: string[] = [];
  for (const t of tokens) {
    const token = await tokenIn(
      ctx,
      owner.namespace,
      t,
      () => {
        const agent = ctx.cache.get('Agent', owner.namespace, t.agent);
        return agent ? agentTokenSecret(ownerOf(agent), owner.name, t, newToken()) : undefined;
      },
      created,
    );
    if (token) present.push({ ...t, token });
    else missing.push(t);
  }
  for (const t of consoleTokens) {
    const token = await tokenIn(
      ctx,
      owner.namespace,
      t,
      () => consoleTokenSecret(owner, t, newToken()),
      created,
    );
    if (token) presentConsole.push({ ...t, token });
    else missing.push(t);
  }
  const file = tokenFileOf(present, presentConsole);
  const any = tokens.length + consoleTokens.length > 0;
  const name = ingressTokensSecretName(owner.name);
  const live = await ctx.client.get('Secret', owner.namespace, name);
  const have = (live as { data?: Record<string, string> } | undefined)?.data?.['tokens.json'];
  if (!live) {
    if (any) {
      await ctx.client.create(ingressTokensSecret(owner, file));
      created.push(`Secret/${name}`);
    }
  } else if (!any) await ctx.client.delete('Secret', owner.namespace, name, live.metadata.uid);
  else if (Buffer.from(have ?? '', 'base64').toString('utf8') !== file)
    await ctx.client.mergePatch('Secret', owner.namespace, name, { stringData: { 'tokens.json': file } });
  return { present, missing, created };
}

/**
 * What the operator last applied of each Holt's exposure (by uid). Like the PodMonitor: no informer
 * (the HTTPRoute kind may not exist), so the last applied object stands in for the cache.
 */
const applied = new Map<string, KubeObject | 'absent'>();

/** Converges the Holt's Ingress or HTTPRoute with spec.ingress.expose, saying how in IngressExposed. */
export async function syncIngressExposure(
  ctx: ControllerContext,
  owner: Owner,
  spec: HoltSpec,
  serving: boolean,
): Promise<ConditionInput> {
  const want = serving ? ingressExposure(owner, spec) : undefined;
  const last = applied.get(owner.uid);
  if (!want) {
    if (last !== 'absent') {
      for (const kind of ['Ingress', 'HTTPRoute']) {
        const live = await ctx.client
          .get(kind, owner.namespace, ingressName(owner.name))
          .catch((e: unknown) => {
            if (isNotFound(e)) return undefined;
            throw e;
          });
        if (live?.metadata.ownerReferences?.some((r) => r.uid === owner.uid))
          await ctx.client.delete(kind, owner.namespace, live.metadata.name, live.metadata.uid);
      }
      applied.set(owner.uid, 'absent');
    }
    return condition(
      'IngressExposed',
      true,
      serving ? 'NotExposed' : 'NoIngress',
      serving
        ? 'spec.ingress.expose is none: reachable in-cluster only'
        : 'no Agent enables spec.ingress and the console is off',
    );
  }
  try {
    const r = await applyIfChanged(
      ctx.client,
      want,
      last === 'absent' || last?.kind !== want.kind ? undefined : last,
    );
    applied.set(owner.uid, r.object);
    return condition(
      'IngressExposed',
      true,
      `${want.kind}Applied`,
      `${want.kind} ${want.metadata.name} applied`,
    );
  } catch (e) {
    applied.delete(owner.uid);
    if (!isNotFound(e)) throw e;
    return condition(
      'IngressExposed',
      false,
      'GatewayApiMissing',
      'spec.ingress.expose is Gateway but the cluster has no HTTPRoute kind (gateway.networking.k8s.io CRDs): install the Gateway API',
    );
  }
}
