import type { V1Container, V1EnvVar, V1NetworkPolicyPeer } from '@kubernetes/client-node';
import type { McpServer, ToolServerRef } from '../../api/agent-llm.ts';
import { type ToolServerSpec, toolServerForm } from '../../api/toolserver.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, MANAGED_BY, meta, type Owner, selectorLabels } from './meta.ts';
import type { NetworkSettings } from './networkpolicy.ts';
import { HOLT_BIN } from './orchestrator.ts';
import { bundleCopyContainer, containerSecurity, httpProbe, podSecurity, RUNTIME_UID } from './pod.ts';

const COMPONENT = 'toolserver';

/** The Deployment, Service and NetworkPolicy of a ToolServer share this name. */
export const toolServerChild = (name: string) => childName('toolserver', name);

/** Pods of Agents that reference ToolServer `name` carry this label; its policy admits only them. */
export const toolServerUseLabel = (name: string) => `toolservers.holt.io/${name}`;

/** The names a client may use for the Service (the bridge refuses other Host headers). */
export function serviceHostnames(name: string, namespace: string): string[] {
  const svc = toolServerChild(name);
  return [svc, `${svc}.${namespace}`, `${svc}.${namespace}.svc`, `${svc}.${namespace}.svc.cluster.local`];
}

/** Where clients reach it: the external url, or the Service's cluster DNS name. */
export function toolServerUrl(name: string, namespace: string, s: ToolServerSpec): string {
  if (s.url) return s.url;
  return `http://${toolServerChild(name)}.${namespace}.svc:${s.port}${s.path}`;
}

const envOf = (s: ToolServerSpec): V1EnvVar[] => [
  // npx and friends write caches under HOME; the root filesystem is read-only.
  { name: 'HOME', value: '/tmp' },
  ...s.env
    .filter((e) => e.name !== 'HOME')
    .map((e) =>
      e.secretKeyRef
        ? {
            name: e.name,
            valueFrom: { secretKeyRef: { name: e.secretKeyRef.name, key: e.secretKeyRef.key } },
          }
        : { name: e.name, value: e.value ?? '' },
    ),
];

/**
 * What runs it. A stdio server runs in its own image behind `holt mcp-bridge`, copied with Node from
 * the runtime image by an init container (the agent pods' `install-runner` way): any image works, the
 * runtime image too (for an npx/node server). An HTTP server runs as its image says. None for a url.
 */
export function toolServerObjects(
  owner: Owner,
  s: ToolServerSpec,
  runtimeImage: string,
  net: NetworkSettings,
  /** The Service's cluster IP once it has one: Agents use it (their pods may have no DNS). */
  clusterIp?: string,
): KubeObject[] {
  const form = toolServerForm(s);
  if (form === 'external') return [];
  const name = toolServerChild(owner.name);
  const sel = selectorLabels(name, COMPONENT);
  const lbls = {
    'app.kubernetes.io/name': 'holt-toolserver',
    ...sel,
    'app.kubernetes.io/part-of': 'holt',
    'app.kubernetes.io/managed-by': MANAGED_BY,
    'holt.io/toolserver': owner.name,
  };
  const bridged = form === 'bridged';
  const server: V1Container = {
    name: 'server',
    image: s.image,
    ...(bridged
      ? {
          command: [
            HOLT_BIN,
            'mcp-bridge',
            '--port',
            String(s.port),
            '--path',
            s.path,
            '--hostname',
            ...serviceHostnames(owner.name, owner.namespace),
            ...(clusterIp && clusterIp !== 'None' ? [clusterIp] : []),
            '--',
            ...(s.command ?? []),
          ],
        }
      : {}),
    env: envOf(s),
    ports: [{ name: 'mcp', containerPort: s.port }],
    readinessProbe: bridged
      ? httpProbe('/healthz', s.port)
      : { tcpSocket: { port: s.port }, periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3 },
    resources: s.resources ?? { requests: { cpu: '50m', memory: '128Mi' } },
    securityContext: containerSecurity(),
    volumeMounts: [
      { name: 'tmp', mountPath: '/tmp' },
      ...(bridged ? [{ name: 'holt', mountPath: '/opt/holt', readOnly: true }] : []),
    ],
  };
  const init: V1Container[] = bridged ? [bundleCopyContainer('install-bridge', runtimeImage, 'holt')] : [];
  const deployment: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(name, owner, lbls),
    spec: {
      replicas: 1,
      selector: { matchLabels: sel },
      template: {
        metadata: { labels: lbls },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: podSecurity(RUNTIME_UID),
          initContainers: init,
          containers: [server],
          volumes: [{ name: 'tmp', emptyDir: {} }, ...(bridged ? [{ name: 'holt', emptyDir: {} }] : [])],
        },
      },
    },
  };
  const service: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(name, owner, lbls),
    spec: { selector: sel, ports: [{ name: 'mcp', port: s.port, targetPort: s.port, protocol: 'TCP' }] },
  };
  return [
    deployment,
    service,
    toolServerPolicy(owner, s, net, lbls, sel),
    clientsPolicy(owner, s, lbls, sel),
  ];
}

/** Egress of the pods that use it (its Agents', by its use label) to its pods on its port: policies add up. */
function clientsPolicy(
  owner: Owner,
  s: ToolServerSpec,
  lbls: Record<string, string>,
  sel: Record<string, string>,
): KubeObject {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta(childName('toolserver', owner.name, 'clients'), owner, lbls),
    spec: {
      podSelector: { matchLabels: { [toolServerUseLabel(owner.name)]: 'use' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ podSelector: { matchLabels: sel } }], ports: [{ protocol: 'TCP', port: s.port }] }],
    },
  };
}

/**
 * Ingress only from the pods of Agents that reference it (they carry its use label) and from the
 * operator (tool discovery); egress only cluster DNS and what the spec declares.
 */
function toolServerPolicy(
  owner: Owner,
  s: ToolServerSpec,
  net: NetworkSettings,
  lbls: Record<string, string>,
  sel: Record<string, string>,
): KubeObject {
  const operator: V1NetworkPolicyPeer = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': net.operatorNamespace } },
    podSelector: { matchLabels: { 'app.kubernetes.io/name': 'holt-operator' } },
  };
  const agents: V1NetworkPolicyPeer = {
    podSelector: { matchLabels: { [toolServerUseLabel(owner.name)]: 'use' } },
  };
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta(toolServerChild(owner.name), owner, lbls),
    spec: {
      podSelector: { matchLabels: sel },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: [agents, operator], ports: [{ protocol: 'TCP', port: s.port }] }],
      egress: [
        {
          to: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
              podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
            },
          ],
        },
        ...s.egress.map((e) => ({
          to: [{ ipBlock: { cidr: e.cidr } }],
          ports: e.ports.map((port) => ({ protocol: 'TCP', port })),
        })),
      ],
    },
  };
}

/** The labels an Agent's pods carry for the ToolServers it references (their policies admit them). */
export function toolServerLabels(refs: { name: string }[] | undefined): Record<string, string> {
  return Object.fromEntries((refs ?? []).map((r) => [toolServerUseLabel(r.name), 'use']));
}

/** What the operator knows of a referenced ToolServer: its spec (or why not), Service address, tools. */
export interface ToolServerView {
  spec?: ToolServerSpec;
  invalid?: string;
  clusterIp?: string;
  ready: boolean;
  message: string;
  tools?: string[];
}

export interface ResolvedToolServer {
  name: string;
  url?: string;
  ready: boolean;
  message: string;
  tools?: string[];
}

/**
 * An Agent's `toolServers` as MCP servers for its pup: an in-cluster one by its Service's cluster IP
 * (agent pods without DNS reach it too; the bridge admits that Host), an external one by its url. One
 * that is missing, invalid or without an address yet is left out and named, the others still serve.
 */
export function resolveToolServers(
  refs: ToolServerRef[],
  view: (name: string) => ToolServerView | undefined,
): { servers: McpServer[]; status: ResolvedToolServer[] } {
  const servers: McpServer[] = [];
  const status: ResolvedToolServer[] = [];
  for (const r of refs) {
    const v = view(r.name);
    if (!v) {
      status.push({ name: r.name, ready: false, message: `ToolServer ${r.name} not found` });
      continue;
    }
    if (!v.spec) {
      status.push({
        name: r.name,
        ready: false,
        message: `ToolServer ${r.name} is invalid: ${v.invalid ?? ''}`,
      });
      continue;
    }
    const external = toolServerForm(v.spec) === 'external';
    if (!external && (!v.clusterIp || v.clusterIp === 'None')) {
      status.push({ name: r.name, ready: false, message: `ToolServer ${r.name} has no Service address yet` });
      continue;
    }
    const url = external ? (v.spec.url as string) : `http://${v.clusterIp}:${v.spec.port}${v.spec.path}`;
    servers.push({
      name: r.name,
      url,
      ...(r.tools ? { tools: r.tools } : {}),
      timeoutSeconds: 30,
      requireApproval: r.requireApproval,
      env: [],
    });
    status.push({
      name: r.name,
      url,
      ready: v.ready,
      message: v.message,
      ...(v.tools ? { tools: v.tools } : {}),
    });
  }
  return { servers, status };
}
