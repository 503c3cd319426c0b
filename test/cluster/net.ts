import type { ClusterPlan } from './plan.ts';
import { sh } from './sh.ts';

/** Link subnets (the X of 10.213.X.0/24) already used by clusters on this host. */
export function usedSubnets(): Set<number> {
  const out = sh('ip', ['-4', '-o', 'addr', 'show'], { allowFail: true });
  return new Set([...out.matchAll(/inet 10\.213\.(\d+)\.1\//g)].map((m) => Number(m[1])));
}

/** The first free link subnet, starting from a value derived from the id (so two runs rarely race). */
export function pickSubnet(id: string): number {
  const used = usedSubnets();
  const start = Number.parseInt(id.slice(0, 2), 16);
  for (let k = 0; k < 256; k++) {
    const s = (start + k) % 256;
    if (!used.has(s)) return s;
  }
  throw new Error('no free 10.213.X.0/24 subnet for another cluster on this host');
}

const forwardRule = (p: ClusterPlan) => ['FORWARD', '-i', p.bridge, '-o', p.bridge, '-j', 'ACCEPT'];

/**
 * The host bridge, one network namespace per node joined to it by a veth pair, routes between the
 * nodes' pod ranges, and the forwarding sysctls kube-proxy needs inside each namespace. The bridge
 * traffic between nodes is accepted explicitly: Docker sets the host's FORWARD policy to DROP and
 * br_netfilter sends bridged frames through it.
 */
export function createNetwork(p: ClusterPlan): void {
  const prefix = p.linkCidr.split('/')[1];
  sh('ip', ['link', 'add', p.bridge, 'type', 'bridge']);
  sh('ip', ['addr', 'add', `${p.hostIp}/${prefix}`, 'dev', p.bridge]);
  sh('ip', ['link', 'set', p.bridge, 'up']);
  sh('iptables', ['-w', '-I', ...forwardRule(p)]);
  for (const n of p.nodes) {
    sh('ip', ['netns', 'add', n.netns]);
    sh('ip', ['link', 'add', n.hostVeth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.netns]);
    sh('ip', ['link', 'set', n.hostVeth, 'master', p.bridge, 'up']);
    const inNs = (...args: string[]) => sh('ip', ['-n', n.netns, ...args]);
    inNs('link', 'set', 'lo', 'up');
    inNs('addr', 'add', `${n.ip}/${prefix}`, 'dev', 'eth0');
    inNs('link', 'set', 'eth0', 'up');
    for (const o of p.nodes) if (o !== n) inNs('route', 'add', o.podCidr, 'via', o.ip);
    // The Service range has no route anywhere: kube-proxy's DNAT rewrites it before routing for pods,
    // and this route lets the node's own processes open sockets to ClusterIPs too.
    inNs('route', 'add', p.serviceCidr, 'dev', 'eth0');
    sysctls(n.netns, {
      'net.ipv4.ip_forward': '1',
      'net.bridge.bridge-nf-call-iptables': '1',
      'net.ipv4.conf.all.route_localnet': '1',
    });
    // Pod to pod keeps its source address across nodes, as on any real CNI: the bridge plugin's ipMasq
    // would hide it behind the node's, and NetworkPolicies that name pods could not match it. Hairpin
    // traffic (kube-proxy's masquerade mark) still goes through.
    sh('ip', [
      'netns',
      'exec',
      n.netns,
      'iptables',
      '-w',
      '-t',
      'nat',
      '-I',
      'POSTROUTING',
      '1',
      '-s',
      p.clusterCidr,
      '-d',
      p.clusterCidr,
      '-m',
      'mark',
      '!',
      '--mark',
      '0x4000/0x4000',
      '-j',
      'RETURN',
    ]);
  }
}

function sysctls(netns: string, values: Record<string, string>): void {
  for (const [k, v] of Object.entries(values)) {
    // bridge-nf-call-iptables is per namespace only on newer kernels (and needs br_netfilter);
    // where it is global it is already on (Docker turns it on), so a refusal here is not fatal.
    sh('ip', ['netns', 'exec', netns, 'sysctl', '-q', '-w', `${k}=${v}`], {
      allowFail: k.startsWith('net.bridge.'),
    });
  }
}

/** Removes what createNetwork made; each step tolerates its object being gone already. */
export function deleteNetwork(p: ClusterPlan): void {
  for (const n of p.nodes) sh('ip', ['netns', 'delete', n.netns], { allowFail: true });
  sh('ip', ['link', 'delete', p.bridge], { allowFail: true });
  for (let k = 0; k < 10 && ruleExists(p); k++) sh('iptables', ['-w', '-D', ...forwardRule(p)]);
}

function ruleExists(p: ClusterPlan): boolean {
  try {
    sh('iptables', ['-w', '-C', ...forwardRule(p)]);
    return true;
  } catch {
    return false;
  }
}

/** Pids of the processes whose network namespace is the node's (its daemons and container shims). */
export function netnsPids(netns: string): number[] {
  return sh('ip', ['netns', 'pids', netns], { allowFail: true })
    .split('\n')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
}
