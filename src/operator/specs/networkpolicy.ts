import type { V1HostAlias, V1NetworkPolicyPeer, V1NetworkPolicyPort } from '@kubernetes/client-node';
import type { HoltSpec } from '../../api/holt.ts';
import { cidrWithin, METADATA_CIDRS } from '../../common/cidr.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';
import { HEALTH_PORT } from './pod.ts';
import { NATS_MONITOR_PORT, STORE_PORTS, STORES, type StoreKind, storeName } from './stores.ts';

/** Pods of agents with `egress: true` carry this label; their Agent's policy opens what it declares. */
export const EGRESS_LABEL = 'holt.io/egress';
/** Pods of agents without DNS carry this label (`deny`): the Holt's DNS policy does not select them. */
export const DNS_LABEL = 'holt.io/dns';

/**
 * Whether an agent's pods go without cluster DNS. A resolver that recurses to the internet carries
 * whatever a tool puts in a name, so DNS is egress; an agent without egress needs only its Holt's
 * stores, whose addresses its pods get in /etc/hosts. External stores are reached by their names, so
 * by default an agent of a Holt with one keeps DNS; `dns: deny` takes it anyway.
 */
export function dnsDenied(
  a: { egress: boolean; dns?: 'allow' | 'deny' },
  stores: HoltSpec['stores'],
): boolean {
  if (a.dns) return a.dns === 'deny';
  return !a.egress && STORES.every((s) => stores[s].mode === 'bundled');
}

/**
 * /etc/hosts entries for a Holt's bundled stores: every name a component's URL uses (the short one of
 * the TLS Redis URL, `.<namespace>.svc` of the Secrets' URLs) at its Service's cluster IP. A store
 * whose Service has no address yet is left out (its Service's creation requeues the Agent).
 */
export function storeHostAliases(
  holt: string,
  namespace: string,
  clusterIps: Partial<Record<StoreKind, string>>,
): V1HostAlias[] {
  return STORES.flatMap((s) => {
    const ip = clusterIps[s];
    if (!ip || ip === 'None') return [];
    const name = storeName(holt, s);
    return [{ ip, hostnames: [name, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`] }];
  });
}

/** Where the operator runs and what the cluster's own addresses are (from the operator's settings). */
export interface NetworkSettings {
  operatorNamespace: string;
  /** Pod and Service CIDRs: never reachable through an agent's egress (the API server, other pods). */
  clusterCidrs: string[];
}

/** The private ranges: every common distribution's pod and service CIDRs fall inside them. */
export const DEFAULT_CLUSTER_CIDRS = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'];
/** The clouds' metadata endpoints (src/common/cidr.ts): excepted from every egress opened here. */
export { METADATA_CIDRS };

const tcp = (port: number): V1NetworkPolicyPort => ({ protocol: 'TCP', port });

/**
 * Default deny for every pod of the Holt, then exactly: Holt pods → the Holt's bundled stores;
 * DNS (but for agents that go without: dnsDenied); the operator (from its namespace) → the stores (agent registry and backlog reads); scrapes of
 * the metrics port. Agents' own egress is their Agent's policy (agentEgressPolicy). External stores are outside the cluster
 * policy's reach by name, so with an external store the Holt's pods may egress to its port.
 */
export function networkPolicies(owner: Owner, spec: HoltSpec, net: NetworkSettings): KubeObject[] {
  const holt = owner.name;
  const inHolt = { 'holt.io/instance': holt };
  const holtPods: V1NetworkPolicyPeer = { podSelector: { matchLabels: inHolt } };
  // The operator reads the registry and the backlog; only from its own namespace.
  const operator: V1NetworkPolicyPeer = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': net.operatorNamespace } },
    podSelector: { matchLabels: { 'app.kubernetes.io/name': 'holt-operator' } },
  };
  const bundled = STORES.filter((s) => spec.stores[s].mode === 'bundled');
  const external = STORES.filter((s) => spec.stores[s].mode === 'external');
  const mk = (suffix: string, s: Record<string, unknown>): KubeObject => {
    const name = childName(holt, suffix);
    return {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: meta(name, owner, labels(holt, name, 'network-policy')),
      spec: s,
    };
  };
  const out = [
    mk('default-deny', {
      podSelector: { matchLabels: inHolt },
      policyTypes: ['Ingress', 'Egress'],
      // Metrics and probes of Holt pods may be scraped; nothing else comes in.
      ingress: [{ ports: [tcp(HEALTH_PORT)] }],
      egress: [
        ...(bundled.length
          ? [
              {
                to: bundled.map(
                  (s): V1NetworkPolicyPeer => ({
                    podSelector: { matchLabels: { ...inHolt, 'app.kubernetes.io/component': s } },
                  }),
                ),
                ports: bundled.map((s) => tcp(STORE_PORTS[s])),
              },
            ]
          : []),
        ...(external.length ? [{ ports: external.map((s) => tcp(STORE_PORTS[s])) }] : []),
      ],
    }),
    // Cluster DNS, any port (policies see the pod's port after the Service's, and DNS pods that run as
    // non-root listen on another: CoreDNS on 1053, OpenShift's on 5353), for every Holt pod but the
    // agents' that go without it (dnsDenied).
    mk('dns', {
      podSelector: {
        matchLabels: inHolt,
        matchExpressions: [{ key: DNS_LABEL, operator: 'NotIn', values: ['deny'] }],
      },
      policyTypes: ['Egress'],
      egress: [
        {
          to: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
              podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
            },
          ],
        },
      ],
    }),
    ...bundled.map((s) =>
      mk(`${s}-ingress`, {
        podSelector: { matchLabels: { ...inHolt, 'app.kubernetes.io/component': s } },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [holtPods, operator],
            ports: [tcp(STORE_PORTS[s]), ...(s === 'nats' ? [tcp(NATS_MONITOR_PORT)] : [])],
          },
        ],
      }),
    ),
    ...seedEgress(holt, spec.workspace.gitUrl, mk),
    ...traceEgress(holt, spec.tracing.endpoint, mk),
  ];
  return out;
}

/**
 * With a trace collector set, the Holt's pods reach its port (the orchestrator and pups export to it;
 * the default deny would drop every span). A collector named as a cluster Service (`name.namespace.svc`,
 * `.svc.<domain>`) is reached in its namespace only, by every pod of the Holt: pods without DNS find it
 * in /etc/hosts (the operator adds the Service's address), and a way out that ends in the user's own
 * collector namespace is no way out. Any other collector is reached on its port anywhere but the
 * metadata range (in-cluster too), by pods with DNS only: a pod without DNS could not resolve its
 * name, and the port would only be a way out for its tools. A policy sees the pod's port after a
 * Service's, so a Service that maps its port to another needs a policy of the user's own.
 */
function traceEgress(
  holt: string,
  endpoint: string | undefined,
  mk: (suffix: string, s: Record<string, unknown>) => KubeObject,
): KubeObject[] {
  if (!endpoint) return [];
  const ns = collectorService(endpoint)?.namespace;
  const to: V1NetworkPolicyPeer[] = ns
    ? [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } }]
    : [...ANYWHERE.map((cidr) => ipBlock(cidr, METADATA_CIDRS)), { namespaceSelector: {} }];
  return [
    mk('trace-egress', {
      podSelector: {
        matchLabels: { 'holt.io/instance': holt },
        ...(ns ? {} : { matchExpressions: [{ key: DNS_LABEL, operator: 'NotIn', values: ['deny'] }] }),
      },
      policyTypes: ['Egress'],
      egress: [{ to, ports: [tcp(urlPort(endpoint, 4318))] }],
    }),
  ];
}

/** A trace collector named as a cluster Service (`name.ns.svc[.domain]` in its URL's host). */
export interface CollectorService {
  /** The host as the URL writes it (what a pod without DNS needs in /etc/hosts). */
  host: string;
  name: string;
  namespace: string;
}

/** The Service a URL's host names, else undefined (`name.ns` alone could be a domain on the internet). */
export function collectorService(url: string | undefined): CollectorService | undefined {
  if (!url) return undefined;
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  const parts = host.split('.');
  const label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
  if (parts.length >= 3 && parts[2] === 'svc' && parts.slice(0, 2).every((p) => label.test(p)))
    return { host, name: parts[0]!, namespace: parts[1]! };
  return undefined;
}

/**
 * The workspace seed Job clones `gitUrl` (no untrusted code runs in it): its port, anywhere but the
 * metadata range, in-cluster Git servers included.
 */
function seedEgress(
  holt: string,
  gitUrl: string | undefined,
  mk: (suffix: string, s: Record<string, unknown>) => KubeObject,
): KubeObject[] {
  if (!gitUrl) return [];
  const anywhere = ANYWHERE.map((cidr) => ipBlock(cidr, METADATA_CIDRS));
  return [
    mk('seed-egress', {
      podSelector: {
        matchLabels: { 'holt.io/instance': holt, 'app.kubernetes.io/component': 'workspace-seed' },
      },
      policyTypes: ['Egress'],
      // scp-like `git@host:path` is no URL: SSH.
      egress: [{ to: [...anywhere, { namespaceSelector: {} }], ports: [tcp(urlPort(gitUrl, 22))] }],
    }),
  ];
}

const ANYWHERE = ['0.0.0.0/0', '::/0'];
const SCHEME_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443, 'ssh:': 22, 'git:': 9418 };

/** The port a URL connects to: explicit, else its scheme's (443 for others), `unparsable` for a non-URL. */
function urlPort(url: string, unparsable: number): number {
  try {
    const u = new URL(url);
    return u.port ? Number(u.port) : (SCHEME_PORTS[u.protocol] ?? 443);
  } catch {
    return unparsable;
  }
}

/**
 * `cidr` minus the excepted ranges that lie strictly inside it; one inside another adds nothing
 * (fd00:ec2::254 lies in fc00::/7).
 */
function ipBlock(cidr: string, excepted: readonly string[]): V1NetworkPolicyPeer {
  const inside = excepted.filter((x) => cidrWithin(x, cidr) && !cidrWithin(cidr, x));
  const except = inside.filter((x) => !inside.some((y) => y !== x && cidrWithin(x, y)));
  return { ipBlock: except.length ? { cidr, except } : { cidr } };
}

/**
 * The egress an Agent with `egress: true` declares, for its pods (controller, workers, claim Jobs:
 * all carry its role): its CIDRs on its ports, minus the metadata address and the cluster's own
 * CIDRs. A declared CIDR that lies wholly inside an excepted one opens nothing and is reported.
 */
export function agentEgressPolicy(
  owner: Owner,
  a: {
    holt: string;
    role: string;
    egress: boolean;
    egressTo?: {
      cidrs: string[];
      ports?: number[];
      pods?: { namespace?: string; labels: Record<string, string> }[];
    };
  },
  llmBaseUrl: string | undefined,
  net: NetworkSettings,
): { policy?: KubeObject; dropped: string[] } {
  if (!a.egress) return { dropped: [] };
  const excepted = [...METADATA_CIDRS, ...net.clusterCidrs];
  const cidrs = a.egressTo?.cidrs ?? ANYWHERE;
  const dropped = cidrs.filter((c) => excepted.some((x) => cidrWithin(c, x)));
  const blocks = cidrs.filter((c) => !dropped.includes(c)).map((cidr) => ipBlock(cidr, excepted));
  const pods = (a.egressTo?.pods ?? []).map(
    (p): V1NetworkPolicyPeer => ({
      podSelector: { matchLabels: p.labels },
      ...(p.namespace
        ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': p.namespace } } }
        : {}),
    }),
  );
  const to = [...blocks, ...pods];
  const ports = (a.egressTo?.ports ?? [llmBaseUrl ? urlPort(llmBaseUrl, 443) : 443]).map(tcp);
  const name = childName(owner.name, 'egress');
  const policy: KubeObject = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta(name, owner, labels(a.holt, name, 'network-policy', { 'holt.io/role': a.role })),
    spec: {
      podSelector: {
        matchLabels: { 'holt.io/instance': a.holt, 'holt.io/role': a.role, [EGRESS_LABEL]: 'true' },
      },
      policyTypes: ['Egress'],
      egress: to.length ? [{ to, ports }] : [],
    },
  };
  return { policy, dropped };
}
