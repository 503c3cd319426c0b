import type { Socket } from 'node:net';

/**
 * What a caller can hold before any token is checked: connections (a cap in all, a cap per source
 * address) and failed authentications (per source, in a window). The ingress answers strangers, so
 * whatever a stranger makes it keep must be bounded by these, not by the stranger's patience.
 */

export interface GuardLimits {
  /** Open connections in all; past it the oldest idle one (no request in flight) makes room, else the new one is closed. */
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
 * Open sockets, oldest first, with the number per source. A socket is busy from the request's head to
 * the end of its response; an idle one (never sent a full head, or kept alive between requests) is
 * the first to go when the cap is reached, so a slow-loris flood cannot keep a prompt caller out.
 */
export class ConnectionGuard {
  // The source is kept with the socket: a closed socket no longer knows its peer.
  private readonly open = new Map<Socket, string>();
  private readonly busy = new Set<Socket>();
  private readonly perSource = new Map<string, number>();
  private readonly limits: GuardLimits;
  private readonly onRefuse: (why: Refusal) => void;
  constructor(limits: GuardLimits, onRefuse: (why: Refusal) => void = () => undefined) {
    this.limits = limits;
    this.onRefuse = onRefuse;
  }

  get size(): number {
    return this.open.size;
  }

  /** Connections with a request in flight. */
  get inFlight(): number {
    return this.busy.size;
  }

  /** A new connection: kept (true) or destroyed here (false). */
  accept(s: Socket): boolean {
    const src = sourceOf(s.remoteAddress);
    const mine = this.perSource.get(src) ?? 0;
    if (mine >= this.limits.maxPerSource) return this.refuse(s, 'source_cap');
    if (this.open.size >= this.limits.maxConnections) {
      const idle = this.oldestIdle();
      if (!idle) return this.refuse(s, 'connection_cap');
      this.onRefuse('evicted');
      idle.destroy();
      this.forget(idle);
    }
    this.open.set(s, src);
    this.perSource.set(src, mine + 1);
    s.once('close', () => this.forget(s));
    return true;
  }

  /** The socket has a request in flight (true) or is waiting for one (false). */
  mark(s: Socket, inFlight: boolean): void {
    if (inFlight && this.open.has(s)) this.busy.add(s);
    else this.busy.delete(s);
  }

  private oldestIdle(): Socket | undefined {
    for (const s of this.open.keys()) if (!this.busy.has(s)) return s;
    return undefined;
  }

  private refuse(s: Socket, why: Refusal): false {
    this.onRefuse(why);
    s.destroy();
    return false;
  }

  private forget(s: Socket): void {
    const src = this.open.get(s);
    if (src === undefined) return;
    this.open.delete(s);
    this.busy.delete(s);
    const n = (this.perSource.get(src) ?? 1) - 1;
    if (n <= 0) this.perSource.delete(src);
    else this.perSource.set(src, n);
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
