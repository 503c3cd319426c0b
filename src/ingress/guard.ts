import type { Socket } from 'node:net';

/**
 * What a caller can hold before any token is checked: connections (a cap in all, a cap per source
 * address) and failed authentications (per source, in a window). The ingress answers strangers, so
 * whatever a stranger makes it keep must be bounded by these, not by the stranger's patience.
 */

export interface GuardLimits {
  /** Open connections in all; past it an idle one of the source holding the most makes room, else the new one is closed. */
  maxConnections: number;
  /** Open connections from one source address. */
  maxPerSource: number;
  /** Failed authentications a source may make in `failureWindowMs` before it gets 429. */
  maxAuthFailures: number;
  failureWindowMs: number;
}

export const DEFAULT_LIMITS: GuardLimits = {
  maxConnections: 1024,
  maxPerSource: 128,
  maxAuthFailures: 20,
  failureWindowMs: 60_000,
};

/** Why a connection was closed on arrival, or to make room (metric label). */
export type Refusal = 'connection_cap' | 'source_cap' | 'evicted';

/**
 * Open sockets by source, oldest first. At the cap, room is made at the expense of the source that
 * holds the most: its oldest idle connection (no request in flight: a head still coming, or kept alive
 * between requests) is closed for a newcomer from a source holding at least two fewer; otherwise the
 * newcomer is. A flood, from one address or many, thus takes its own slots, never those of a caller
 * that holds one or two, however late the event loop reads that caller's head.
 */
export class ConnectionGuard {
  private readonly bySource = new Map<string, Set<Socket>>();
  // The source is kept with the socket: a closed socket no longer knows its peer.
  private readonly sourceOfSocket = new Map<Socket, string>();
  private readonly busy = new Set<Socket>();
  private readonly limits: GuardLimits;
  private readonly onRefuse: (why: Refusal) => void;
  constructor(limits: GuardLimits, onRefuse: (why: Refusal) => void = () => undefined) {
    this.limits = limits;
    this.onRefuse = onRefuse;
  }

  get size(): number {
    return this.sourceOfSocket.size;
  }

  /** Connections with a request in flight. */
  get inFlight(): number {
    return this.busy.size;
  }

  /** A new connection: kept (true) or destroyed here (false). */
  accept(s: Socket): boolean {
    const src = sourceOf(s.remoteAddress);
    const mine = this.bySource.get(src)?.size ?? 0;
    if (mine >= this.limits.maxPerSource) return this.refuse(s, 'source_cap');
    if (this.size >= this.limits.maxConnections) {
      const idle = this.evictable(mine);
      if (!idle) return this.refuse(s, 'connection_cap');
      this.onRefuse('evicted');
      idle.destroy();
      this.forget(idle);
    }
    const set = this.bySource.get(src) ?? new Set<Socket>();
    this.bySource.set(src, set.add(s));
    this.sourceOfSocket.set(s, src);
    s.once('close', () => this.forget(s));
    return true;
  }

  /** The socket has a request in flight (true) or is waiting for one (false). */
  mark(s: Socket, inFlight: boolean): void {
    if (inFlight && this.sourceOfSocket.has(s)) this.busy.add(s);
    else this.busy.delete(s);
  }

  /** The oldest idle connection of the biggest source, if that source holds two more than `mine`. */
  private evictable(mine: number): Socket | undefined {
    let big: Set<Socket> | undefined;
    for (const set of this.bySource.values()) if (!big || set.size > big.size) big = set;
    if (!big || big.size < mine + 2) return undefined;
    for (const s of big) if (!this.busy.has(s)) return s;
    return undefined;
  }

  private refuse(s: Socket, why: Refusal): false {
    this.onRefuse(why);
    s.destroy();
    return false;
  }

  private forget(s: Socket): void {
    const src = this.sourceOfSocket.get(s);
    if (src === undefined) return;
    this.sourceOfSocket.delete(s);
    this.busy.delete(s);
    const set = this.bySource.get(src);
    set?.delete(s);
    if (set?.size === 0) this.bySource.delete(src);
  }
}

/**
 * Failed authentications per source in a fixed window (pure decisions on a map the caller keeps).
 * Past `maxAuthFailures` the source gets 429 until its window ends, whatever token it presents: a
 * guess that happened to be right must not be told apart from a wrong one while it is blocked.
 */
export class FailureLimiter {
  private readonly seen = new Map<string, { n: number; untilMs: number }>();
  private readonly limits: GuardLimits;
  constructor(limits: GuardLimits) {
    this.limits = limits;
  }

  /** Milliseconds until the source may try again, or 0 when it may now. */
  blockedFor(source: string, nowMs: number): number {
    const w = this.seen.get(source);
    if (!w || w.untilMs <= nowMs) return 0;
    return w.n >= this.limits.maxAuthFailures ? w.untilMs - nowMs : 0;
  }

  fail(source: string, nowMs: number): void {
    const w = this.seen.get(source);
    if (w && w.untilMs > nowMs) {
      w.n++;
      return;
    }
    this.seen.delete(source);
    // Bounded: ended windows go first, then the oldest (a flood of sources forgets its own first).
    if (this.seen.size >= MAX_SOURCES)
      for (const [k, v] of this.seen)
        if (v.untilMs <= nowMs || this.seen.size >= MAX_SOURCES) this.seen.delete(k);
        else break;
    this.seen.set(source, { n: 1, untilMs: nowMs + this.limits.failureWindowMs });
  }
}

const MAX_SOURCES = 50_000;

/**
 * The source a limit counts: an IPv4 address (also when IPv4-mapped), or an IPv6 address's /64, the
 * block one host usually has to itself.
 */
export function sourceOf(address: string | undefined): string {
  if (!address) return '?';
  const v4 = /^(?:::ffff:)?(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return v4[1]!;
  if (!address.includes(':')) return address;
  const [head = '', tail = ''] = address.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const full = address.includes('::')
    ? [...h, ...Array(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t]
    : h;
  return `${full
    .slice(0, 4)
    .map((x) => x.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
