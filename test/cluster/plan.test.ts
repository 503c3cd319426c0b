import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { kubeletConfig, nodePaths } from './config.ts';
import { clusterId, clusterPlan } from './plan.ts';

describe('clusterPlan', () => {
  it('gives every node its own namespace, address, pod range and an interface name Linux accepts', () => {
    const id = clusterId('e2e', 'salt');
    const p = clusterPlan('e2e', id, 3, 7);
    expect(p.hostIp).toBe('10.213.7.1');
    expect(p.nodes.map((n) => n.ip)).toEqual(['10.213.7.11', '10.213.7.12', '10.213.7.13']);
    expect(new Set(p.nodes.map((n) => n.podCidr)).size).toBe(3);
    expect(new Set(p.nodes.map((n) => n.netns)).size).toBe(3);
    for (const name of [p.bridge, ...p.nodes.map((n) => n.hostVeth)])
      expect(name.length).toBeLessThanOrEqual(15);
  });

  it('keeps two clusters of one name apart by their id', () => {
    const a = clusterPlan('holt', clusterId('holt', '1'), 1, 0);
    const b = clusterPlan('holt', clusterId('holt', '2'), 1, 1);
    expect(a.bridge).not.toBe(b.bridge);
    expect(a.nodes[0]!.netns).not.toBe(b.nodes[0]!.netns);
  });

  it('refuses names, ids, node counts and subnets it cannot make', () => {
    expect(() => clusterPlan('Bad_Name', 'abcdef', 1, 0)).toThrow(/cluster name/);
    expect(() => clusterPlan('ok', 'xyz', 1, 0)).toThrow(/cluster id/);
    expect(() => clusterPlan('ok', 'abcdef', 0, 0)).toThrow(/nodes/);
    expect(() => clusterPlan('ok', 'abcdef', 1, 256)).toThrow(/subnet/);
  });

  it("binds the kubelet to its node's address and trusts only the cluster CA for clients", () => {
    const p = clusterPlan('e2e', 'abcdef', 1, 3);
    const n = p.nodes[0]!;
    const k = parse(kubeletConfig(p, n, nodePaths('/c', n), '/c/pki/ca.crt'));
    expect(k.address).toBe(n.ip);
    expect(k.authentication).toEqual({
      anonymous: { enabled: false },
      webhook: { enabled: false },
      x509: { clientCAFile: '/c/pki/ca.crt' },
    });
    expect(k.clusterDNS).toEqual([p.dnsServiceIp]);
  });
});
