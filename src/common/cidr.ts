import ipaddr from 'ipaddr.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

const parse = (v: string): Range | undefined => {
  try {
    return ipaddr.parseCIDR(v);
  } catch {
    return undefined;
  }
};

/** Whether `v` is an IPv4 or IPv6 CIDR (address/prefix). */
export const isCidr = (v: string): boolean => parse(v) !== undefined;

/** Whether CIDR `inner` lies within CIDR `outer` (same family; equal counts as within). */
export function cidrWithin(inner: string, outer: string): boolean {
  const a = parse(inner);
  const b = parse(outer);
  if (!a || !b || a[1] < b[1]) return false;
  const [ia, ib] = [a[0], b[0]];
  if (ia.kind() === 'ipv4' && ib.kind() === 'ipv4') return (ia as ipaddr.IPv4).match(ib as ipaddr.IPv4, b[1]);
  if (ia.kind() === 'ipv6' && ib.kind() === 'ipv6') return (ia as ipaddr.IPv6).match(ib as ipaddr.IPv6, b[1]);
  return false;
}

/**
 * The clouds' instance metadata endpoints (node credentials, user data): excepted from every egress
 * a policy opens. One list, each entry with whose it is:
 *   169.254.0.0/16      link-local: AWS, GCP, Azure, Oracle, OpenStack, DigitalOcean (169.254.169.254),
 *                       and the rest of the range (ECS task metadata at 169.254.170.2, EKS Pod Identity);
 *   100.100.100.200/32  Alibaba Cloud (a CGNAT address, outside every private range);
 *   fd00:ec2::254/128   AWS over IPv6;
 *   fe80::/10           IPv6 link-local (OpenStack's fe80::a9fe:a9fe).
 */
export const METADATA_CIDRS: readonly string[] = [
  '169.254.0.0/16',
  '100.100.100.200/32',
  'fd00:ec2::254/128',
  'fe80::/10',
];
