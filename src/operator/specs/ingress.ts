import { CONSOLE_BASE, type ConsoleTokenEntry, hashToken, type TokenEntry } from '../../access/tokens.ts';
import type { AgentSpec } from '../../api/agent.ts';
import type { HoltSpec } from '../../api/holt.ts';
import type { Callback } from '../../common/callback.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';
import { orchestratorName } from './orchestrator.ts';
import { INGRESS_PORT } from './pod.ts';

/**
 * Living agents' ingress on a cluster (pure builders): each Agent's capability tokens live in Secrets
 * (`<agent>-ingress-<token>`, key `token`); the orchestrator gets only their hashes, in one Secret of
 * the Holt (`<holt>-ingress-tokens`, key `tokens.json`, the file `holt token` writes locally), mounted
 * where HOLT_INGRESS_TOKENS_FILE points. The port is admitted by its own NetworkPolicy, and exposed with
 * an Ingress or a Gateway API HTTPRoute when the Holt asks.
 */

export const INGRESS_TOKENS_DIR = '/etc/holt/ingress';
/** The ingress's NetworkPolicy, and its Ingress or HTTPRoute (different kinds, one name). */
export const ingressName = (holt: string) => childName(holt, 'ingress');
export const ingressTokensSecretName = (holt: string) => childName(holt, 'ingress-tokens');
/** The Secret the operator makes for a token the Agent does not bring its own Secret for. */
export const agentTokenSecretName = (agent: string, token: string) => childName(agent, 'ingress', token);

/** One token of an Agent as the Holt's reconcile sees it. */
export interface AgentToken {
  agent: string;
  role: string;
  name: string;
  secretName: string;
  /** The operator makes (and owns) this Secret; else it is the user's. */
  managed: boolean;
  modes: ('enqueue_message' | 'wake_hint')[];
  origin: 'operator' | 'webhook' | 'callback';
  ratePerMinute: number;
  maxPriority: number;
  callbacks: Callback[];
}

/** The tokens an Agent's spec declares (none unless its ingress is enabled). */
export function agentTokens(agent: string, role: string, spec: AgentSpec): AgentToken[] {
  const i = spec.ingress;
  if (!i?.enabled) return [];
  return i.tokens.map((t) => ({
    agent,
    role,
    name: t.name,
    secretName: t.secretName ?? agentTokenSecretName(agent, t.name),
    managed: t.secretName === undefined,
    modes: (t.modes ?? i.modes).filter((m) => i.modes.includes(m)),
    origin: t.origin,
    ratePerMinute: t.ratePerMinute ?? i.rateLimitPerMinute,
    maxPriority: t.maxPriority,
    callbacks: t.callbacks,
  }));
}

/** A token Secret the operator makes, owned by its Agent (deleted with it). */
export function agentTokenSecret(agentOwner: Owner, holt: string, t: AgentToken, token: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(
      t.secretName,
      agentOwner,
      labels(holt, t.secretName, 'ingress-token', { 'holt.io/role': t.role, 'holt.io/token': t.name }),
    ),
    type: 'Opaque',
    stringData: { token },
  };
}

/** A console token of the Holt (spec.ingress.console.tokens): it signs a browser into the console. */
export interface ConsoleToken {
  name: string;
  secretName: string;
  /** The operator makes (and owns, by the Holt) this Secret; else it is the user's. */
  managed: boolean;
  access: 'read' | 'act';
}

export const consoleTokenSecretName = (holt: string, token: string) => childName(holt, 'console', token);

/** The console tokens a Holt declares (none unless its console is enabled). */
export function consoleTokens(holt: string, spec: HoltSpec): ConsoleToken[] {
  const c = spec.ingress.console;
  if (!c.enabled) return [];
  return c.tokens.map((t) => ({
    name: t.name,
    secretName: t.secretName ?? consoleTokenSecretName(holt, t.name),
    managed: t.secretName === undefined,
    access: t.access,
  }));
}

/** A console token Secret the operator makes, owned by the Holt. */
export function consoleTokenSecret(owner: Owner, t: ConsoleToken, token: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(
      t.secretName,
      owner,
      labels(owner.name, t.secretName, 'console-token', { 'holt.io/token': t.name }),
    ),
    type: 'Opaque',
    stringData: { token },
  };
}

/** The hashed token file of the Holt (what the orchestrator reads). Sorted, so it changes only with the tokens. */
export function tokenFileOf(
  tokens: (AgentToken & { token: string })[],
  console: (ConsoleToken & { token: string })[] = [],
): string {
  const entries: TokenEntry[] = tokens
    .map((t) => ({
      name: t.name,
      role: t.role,
      sha256: hashToken(t.token),
      modes: t.modes,
      origin: t.origin,
      ratePerMinute: t.ratePerMinute,
      maxPriority: t.maxPriority,
      callbacks: t.callbacks,
      createdAtMs: 0,
    }))
    .sort((a, b) => `${a.role}/${a.name}`.localeCompare(`${b.role}/${b.name}`));
  const consoleEntries: ConsoleTokenEntry[] = console
    .map((t) => ({ name: t.name, sha256: hashToken(t.token), access: t.access, createdAtMs: 0 }))
    .sort((a, b) => a.name.localeCompare(b.name));
  // An older orchestrator's file had no `console`: left out when empty, so its bytes do not change.
  const file = consoleEntries.length ? { tokens: entries, console: consoleEntries } : { tokens: entries };
  return `${JSON.stringify(file, null, 2)}\n`;
}

export function ingressTokensSecret(owner: Owner, file: string): KubeObject {
  const name = ingressTokensSecretName(owner.name);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(name, owner, labels(owner.name, name, 'ingress-tokens')),
    type: 'Opaque',
    stringData: { 'tokens.json': file },
  };
}

/**
 * Only the ingress port of the orchestrator, from the allowed addresses and from pods of any namespace
 * (ingress controllers and gateways run in-cluster). The Holt's default-deny keeps the rest closed.
 */
export function ingressNetworkPolicy(owner: Owner, spec: HoltSpec): KubeObject {
  const name = ingressName(owner.name);
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta(name, owner, labels(owner.name, name, 'network-policy')),
    spec: {
      podSelector: {
        matchLabels: { 'holt.io/instance': owner.name, 'app.kubernetes.io/component': 'orchestrator' },
      },
      policyTypes: ['Ingress'],
      ingress: [
        {
          from: [...spec.ingress.allowFrom.map((cidr) => ({ ipBlock: { cidr } })), { namespaceSelector: {} }],
          ports: [{ protocol: 'TCP', port: INGRESS_PORT }],
        },
      ],
    },
  };
}

/** What of the ingress port is exposed: the agents' API and their A2A endpoints (src/a2a). */
export const EXPOSED_PATHS = ['/v1/agents', '/a2a'] as const;
const exposedPaths = (spec: HoltSpec): string[] => [
  ...EXPOSED_PATHS,
  ...(spec.ingress.console.enabled ? [CONSOLE_BASE] : []),
];

/** The Ingress or HTTPRoute that exposes EXPOSED_PATHS of the orchestrator's ingress port; none for `none`. */
export function ingressExposure(owner: Owner, spec: HoltSpec): KubeObject | undefined {
  const i = spec.ingress;
  const name = ingressName(owner.name);
  const service = orchestratorName(owner.name);
  const md = meta(name, owner, labels(owner.name, name, 'ingress'));
  if (i.expose === 'Ingress')
    return {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'Ingress',
      metadata: md,
      spec: {
        ...(i.className ? { ingressClassName: i.className } : {}),
        ...(i.tlsSecretName && i.host ? { tls: [{ hosts: [i.host], secretName: i.tlsSecretName }] } : {}),
        rules: [
          {
            ...(i.host ? { host: i.host } : {}),
            http: {
              paths: exposedPaths(spec).map((path) => ({
                path,
                pathType: 'Prefix',
                backend: { service: { name: service, port: { name: 'ingress' } } },
              })),
            },
          },
        ],
      },
    };
  if (i.expose === 'Gateway' && i.gateway)
    return {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'HTTPRoute',
      metadata: md,
      spec: {
        parentRefs: [
          {
            name: i.gateway.name,
            ...(i.gateway.namespace ? { namespace: i.gateway.namespace } : {}),
            ...(i.gateway.sectionName ? { sectionName: i.gateway.sectionName } : {}),
          },
        ],
        ...(i.host ? { hostnames: [i.host] } : {}),
        rules: [
          {
            matches: exposedPaths(spec).map((value) => ({ path: { type: 'PathPrefix', value } })),
            backendRefs: [{ name: service, port: INGRESS_PORT }],
          },
        ],
      },
    };
  return undefined;
}
