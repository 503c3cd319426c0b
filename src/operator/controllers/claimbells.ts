import { workerTargetOf } from '../../api/agent.ts';
import type { BacklogTarget } from '../autoscale/backlog.ts';
import type { WakeupSource } from '../autoscale/wakeup.ts';
import type { KubeObject } from '../kube/kube.ts';
import { shapeOf } from '../specs/agent.ts';
import { parseAgent, splitKey } from './resources.ts';

/**
 * Doorbell subscriptions of fresh_per_call Agents (leader only): a bell for an agent's target
 * queues its reconcile at once, so a new claim gets its Job without waiting for the poll (which
 * stays as the backstop for a lost bell).
 */
export class ClaimBells {
  readonly #wakeups: WakeupSource;
  readonly #onWake: (key: string) => void;
  readonly #subs = new Map<string, { id: string; unsubscribe: () => void }>();

  constructor(wakeups: WakeupSource, onWake: (key: string) => void) {
    this.#wakeups = wakeups;
    this.#onWake = onWake;
  }

  /** Brings one Agent's subscription in step with its spec; `undefined` (deleted) drops it. */
  sync(key: string, agent: KubeObject | undefined): void {
    const t = agent && !agent.metadata.deletionTimestamp ? bellTarget(splitKey(key)[0], agent) : undefined;
    const id = t && `${t.holt}/${t.target}`;
    const have = this.#subs.get(key);
    if (have?.id === id) return;
    have?.unsubscribe();
    this.#subs.delete(key);
    if (t && id)
      this.#subs.set(key, { id, unsubscribe: this.#wakeups.subscribe(t, () => this.#onWake(key)) });
  }

  /** Drops every subscription (leadership lost, or stopping). */
  clear(): void {
    for (const s of this.#subs.values()) s.unsubscribe();
    this.#subs.clear();
  }
}

function bellTarget(namespace: string, agent: KubeObject): BacklogTarget | undefined {
  const parsed = parseAgent(agent);
  if (!parsed.ok || shapeOf(parsed.spec) !== 'jobs') return undefined;
  const a = parsed.spec;
  return { namespace, holt: a.holt, target: workerTargetOf(a, a.role) };
}
