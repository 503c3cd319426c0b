import { randomBytes } from 'node:crypto';
import type { Logger } from '../../common/logger.ts';
import type { KubeClient, KubeObject } from './kube.ts';

export type EventType = 'Normal' | 'Warning';

const REPEAT_WINDOW_MS = 10 * 60_000;

/**
 * Kubernetes Events (events.k8s.io/v1) for changes a user cares about: created, scaled, degraded.
 * The same (object, reason, note) is not repeated within ten minutes, so a requeue loop cannot
 * spam; notes are built by the caller from names and counts only, never from secrets.
 */
export class EventRecorder {
  readonly #client: KubeClient;
  readonly #instance: string;
  readonly #log: Logger;
  readonly #recent = new Map<string, number>();

  constructor(client: KubeClient, instance: string, log: Logger) {
    this.#client = client;
    this.#instance = instance;
    this.#log = log;
  }

  emit(regarding: KubeObject, type: EventType, reason: string, action: string, note: string): void {
    const key = `${regarding.metadata.uid}/${reason}/${note}`;
    const now = Date.now();
    if ((this.#recent.get(key) ?? 0) > now - REPEAT_WINDOW_MS) return;
    this.#recent.set(key, now);
    if (this.#recent.size > 10_000) {
      for (const [k, t] of this.#recent) if (t < now - REPEAT_WINDOW_MS) this.#recent.delete(k);
    }
    const ns = regarding.metadata.namespace ?? 'default';
    const event: KubeObject = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${regarding.metadata.name}.${randomBytes(6).toString('hex')}`, namespace: ns },
      eventTime: new Date(now).toISOString().replace('Z', '000Z'),
      reportingController: 'holt.io/operator',
      reportingInstance: this.#instance,
      action,
      reason,
      type,
      note: note.slice(0, 1024),
      regarding: {
        apiVersion: regarding.apiVersion,
        kind: regarding.kind,
        name: regarding.metadata.name,
        namespace: ns,
        uid: regarding.metadata.uid,
      },
    };
    this.#client.create(event).catch((e: unknown) => {
      this.#log.debug({ event_type: 'event_failed', error: String(e) }, 'could not record event');
    });
  }
}
