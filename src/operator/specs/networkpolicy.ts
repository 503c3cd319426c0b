import type { V1NetworkPolicyPeer, V1NetworkPolicyPort } from '@kubernetes/client-node';
import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../runtime/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';
import { HEALTH_PORT } from './pod.ts';
import { NATS_MONITOR_PORT, STORE_PORTS, STORES } from './stores.ts';

/** Pods of agents with `egress: true` carry this label; one policy opens egress for them. */
export const EGRESS_LABEL = 'holt.io/egress';

const tcp = (port: number): V1NetworkPolicyPort => ({ protocol: 'TCP', port });

/**
 * Default deny for every pod of the Holt, then exactly: Holt pods → the Holt's bundled stores;
 * DNS; the operator → the stores (agent registry and backlog reads); scrapes of the metrics port;
 * and any egress for pods labelled holt.io/egress=true. External stores are outside the cluster
 * policy's reach by name, so with an external store the Holt's pods may egress to its port.
 */
export function networkPolicies(owner: Owner, spec: HoltSpec): KubeObject[] {
  const holt = owner.name;
  const inHolt = { 'holt.io/instance': holt };
  const holtPods: V1NetworkPolicyPeer = { podSelector: { matchLabels: inHolt } };
  const operator: V1NetworkPolicyPeer = {
    namespaceSelector: {},
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
        {
          to: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
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
    mk('agent-egress', {
      podSelector: { matchLabels: { ...inHolt, [EGRESS_LABEL]: 'true' } },
      policyTypes: ['Egress'],
      egress: [{}],
    }),
  ];
  return out;
}
