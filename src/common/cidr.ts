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
