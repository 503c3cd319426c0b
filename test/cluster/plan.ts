import { createHash } from 'node:crypto';

/**
 * The addresses and names of a local cluster, decided up front from its id: a pure function, so the
 * set-up, the tear-down (from a saved state file) and the tests all agree on them.
 *
 * Every pod and Service address lives inside network namespaces the cluster makes: each node is one
 * namespace (`holt-<id>-n<i>`) holding its containerd, kubelet, kube-proxy, CNI bridge and pods. The
 * nodes and the host meet on one bridge of the host (`hb<id>`), on a /24 of 10.213.0.0/16 (the host
 * side is where the API server is reached from pods). The node namespaces have no default route, so
 * nothing in the cluster can send traffic off the machine.
 */
export interface NodePlan {
  index: number;
  /** Kubernetes Node name. */
  name: string;
  netns: string;
  /** Host side of the node's veth pair (at most 15 characters, as Linux requires). */
  hostVeth: string;
  /** The node's address on the cluster bridge (its InternalIP). */
  ip: string;
  /** This node's pod range (CNI host-local). */
  podCidr: string;
  podGateway: string;
}

export interface ClusterPlan {
  name: string;
  id: string;
  bridge: string;
  /** The host's address on the bridge: the API server's advertise address. */
  hostIp: string;
  linkCidr: string;
  clusterCidr: string;
  serviceCidr: string;
  /** The `kubernetes` Service's ClusterIP (first of the range) and the DNS Service's. */
  apiServiceIp: string;
  dnsServiceIp: string;
  clusterDomain: string;
  nodes: NodePlan[];
}

export const CLUSTER_CIDR = '10.244.0.0/16';
export const SERVICE_CIDR = '10.96.0.0/16';

/** A short id for interface names; `salt` keeps two clusters of one name (two test runs) apart. */
export function clusterId(name: string, salt: string): string {
  return createHash('sha256').update(`${name}/${salt}`).digest('hex').slice(0, 6);
}

/**
 * The plan of cluster `name` with `nodes` nodes on link subnet 10.213.<subnet>.0/24 (the caller
 * picks a subnet no other cluster on the host uses).
 */
export function clusterPlan(name: string, id: string, nodes: number, subnet: number): ClusterPlan {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name) || name.length > 40)
    throw new Error(`cluster name "${name}": use lower-case letters, digits and '-' (at most 40)`);
  if (!/^[0-9a-f]{6}$/.test(id)) throw new Error(`cluster id "${id}": six hex digits`);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 8) throw new Error(`nodes: 1 to 8, not ${nodes}`);
  if (!Number.isInteger(subnet) || subnet < 0 || subnet > 255)
    throw new Error(`subnet: 0 to 255, not ${subnet}`);
  const link = `10.213.${subnet}`;
  return {
    name,
    id,
    bridge: `hb${id}`,
    hostIp: `${link}.1`,
    linkCidr: `${link}.0/24`,
    clusterCidr: CLUSTER_CIDR,
    serviceCidr: SERVICE_CIDR,
    apiServiceIp: '10.96.0.1',
    dnsServiceIp: '10.96.0.10',
    clusterDomain: 'cluster.local',
    nodes: Array.from({ length: nodes }, (_, k) => {
      const index = k + 1;
      return {
        index,
        name: `${name}-node-${index}`,
        netns: `holt-${id}-n${index}`,
        hostVeth: `hv${id}${index}`,
        ip: `${link}.${10 + index}`,
        podCidr: `10.244.${index}.0/24`,
        podGateway: `10.244.${index}.1`,
      };
    }),
  };
}
