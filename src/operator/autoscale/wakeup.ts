import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { connectBus } from '../../bus/connect.ts';
import { Doorbell } from '../../bus/doorbell.ts';
import { jsonOf } from '../../bus/message.ts';
import { doorbellSubject } from '../../bus/subjects.ts';
import { endpointOf, type StoreEndpoint } from '../kube/endpoint.ts';
import type { BacklogTarget } from './backlog.ts';

/** Calls `onWake` when work for a target may have arrived (a doorbell), so scaling need not wait a poll. */
export interface WakeupSource {
  subscribe(t: BacklogTarget, onWake: () => void): () => void;
  close?(): Promise<void>;
}

/** Resolves a Holt's NATS URL (from its generated Secret or the external one). */
export type NatsUrlResolver = (t: { namespace: string; holt: string }) => Promise<StoreEndpoint>;

/**
 * Doorbells from each Holt's NATS: `cmd.agent.{target}.wakeup`, without a queue group, so the
 * operator hears every bell besides the worker the group hands it to.
 */
export class NatsWakeups implements WakeupSource {
  readonly #resolve: NatsUrlResolver;
  readonly #conns = new Map<string, Promise<NatsConnection>>();

  constructor(resolve: NatsUrlResolver) {
    this.#resolve = resolve;
  }

  subscribe(t: BacklogTarget, onWake: () => void): () => void {
    let sub: Subscription | undefined;
    let closed = false;
    this.#conn(t)
      .then((nc) => {
        if (closed) return;
        sub = nc.subscribe(doorbellSubject(t.target), {
          callback: (err, msg) => {
            if (err) return;
            const bell = Doorbell.safeParse(jsonOf(msg));
            if (bell.success && bell.data.instance === t.holt) onWake();
          },
        });
      })
      .catch(() => undefined); // polling still covers the target
    return () => {
      closed = true;
      sub?.unsubscribe();
    };
  }

  async close(): Promise<void> {
    const all = await Promise.allSettled(this.#conns.values());
    for (const c of all) if (c.status === 'fulfilled') await c.value.drain().catch(() => undefined);
    this.#conns.clear();
  }

  #conn(t: BacklogTarget): Promise<NatsConnection> {
    const key = `${t.namespace}/${t.holt}`;
    let c = this.#conns.get(key);
    if (!c) {
      c = this.#resolve(t).then((e) => {
        const { url, ca } = endpointOf(e);
        return connectBus(url, 'holt-operator', ca);
      });
      c.catch(() => this.#conns.delete(key));
      this.#conns.set(key, c);
    }
    return c;
  }
}
