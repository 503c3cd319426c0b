import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../common/logger.ts';
import { ApiError, type KubeClient, type KubeObject } from './kube.ts';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
type Lease = KubeObject & { spec?: LeaseSpec };

const microTime = (t: number) => new Date(t).toISOString().replace('Z', '000Z');

/**
 * Leader election on a coordination.k8s.io Lease, as client-go's: compare-and-swap on
 * resourceVersion; a lease counts as held while its record keeps changing within the lease
 * duration as observed on our own clock (no trust in other clocks). Standby replicas keep trying
 * every retry period; a leader that cannot renew within the renew deadline steps down.
 *
 * The renew deadline is enforced on our own clock, not only when a request returns: every lease
 * request is aborted after the renew deadline, and a timer steps the leader down at
 * (start of the last successful renewal) + renewDeadline, which is before any standby can count
 * the lease as expired (leaseDuration after it observed that renewal). A stalled API server thus
 * never leaves two replicas reconciling.
 */
export class LeaderElector {
  readonly #client: KubeClient;
  readonly #o: Required<LeaderOptions>;
  readonly #log: Logger;
  #observed?: { rv: string; holder: string; at: number };
  #leader = false;
  #stopped = false;
  #abort = new AbortController();
  #deadline?: NodeJS.Timeout;
  #onStop?: () => void;

  constructor(client: KubeClient, opts: LeaderOptions, log: Logger) {
    this.#client = client;
    this.#o = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...opts };
    this.#log = log.child({ lease: `${opts.namespace}/${opts.name}` });
  }

  get isLeader(): boolean {
    return this.#leader;
  }

  /** Runs until stop(): calls onStart when leadership is won and onStop when it is lost. */
  async run(onStart: () => void, onStop: () => void): Promise<void> {
    this.#onStop = onStop;
    const { renewDeadlineMs } = this.#o;
    while (!this.#stopped) {
      // The renewal counts from when it was sent (others observe it no earlier than that).
      const started = Date.now();
      let ok = false;
      try {
        ok = await this.#tryAcquireOrRenew(
          started,
          AbortSignal.any([this.#abort.signal, AbortSignal.timeout(renewDeadlineMs)]),
        );
      } catch (e) {
        this.#log.warn({ event_type: 'lease_error', error: String(e) }, 'lease request failed');
      }
      const deadline = started + renewDeadlineMs;
      // An answer that came after the deadline is too late: we may have stepped down meanwhile.
      if (ok && Date.now() < deadline && !this.#stopped) {
        clearTimeout(this.#deadline);
        this.#deadline = setTimeout(() => this.#stepDown(), deadline - Date.now());
        if (!this.#leader) {
          this.#leader = true;
          this.#log.info({ event_type: 'leader_elected' }, 'became leader');
          onStart();
        }
      }
      await sleep(this.#o.retryPeriodMs, undefined, { signal: this.#abort.signal }).catch(() => undefined);
    }
  }

  /** The renew deadline passed without a successful renewal: stop leading at once. */
  #stepDown(): void {
    clearTimeout(this.#deadline);
    if (!this.#leader) return;
    this.#leader = false;
    this.#log.warn({ event_type: 'leader_lost' }, 'could not renew the lease within the renew deadline');
    this.#onStop?.();
  }

  /** Stops trying; a leader releases the lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort.abort();
    clearTimeout(this.#deadline);
    if (!this.#leader) return;
    this.#leader = false;
    try {
      const signal = AbortSignal.timeout(this.#o.renewDeadlineMs);
      const lease = await this.#client.get<Lease>('Lease', this.#o.namespace, this.#o.name, { signal });
      if (lease?.spec?.holderIdentity === this.#o.identity) {
        await this.#client.update(
          { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } },
          undefined,
          { signal },
        );
      }
    } catch (e) {
      this.#log.warn({ event_type: 'lease_release_failed', error: String(e) }, 'could not release the lease');
    }
  }

  async #tryAcquireOrRenew(now: number, signal: AbortSignal): Promise<boolean> {
    const { namespace, name, identity, leaseDurationMs } = this.#o;
    const durationS = Math.ceil(leaseDurationMs / 1000);
    const lease = await this.#client.get<Lease>('Lease', namespace, name, { signal });
    if (!lease) {
      try {
        await this.#client.create<Lease>(
          {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: durationS,
              acquireTime: microTime(now),
              renewTime: microTime(now),
              leaseTransitions: 0,
            },
          },
          undefined,
          { signal },
        );
        return true;
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const rv = lease.metadata.resourceVersion ?? '';
    if (!this.#observed || this.#observed.rv !== rv) this.#observed = { rv, holder, at: now };
    const heldByOther =
      holder !== '' &&
      holder !== identity &&
      now - this.#observed.at < (spec.leaseDurationSeconds ?? durationS) * 1000;
    if (heldByOther) return false;
    const next: Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: durationS,
        renewTime: microTime(now),
        ...(holder === identity
          ? {}
          : { acquireTime: microTime(now), leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
      },
    };
    try {
      const updated = await this.#client.update(next, undefined, { signal });
      this.#observed = { rv: updated.metadata.resourceVersion ?? '', holder: identity, at: now };
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) return false;
      throw e;
    }
  }
}
