import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { z } from 'zod';
import type { Logger } from '../common/logger.ts';
import { jsonOf, traceHeaders } from './message.ts';
import { doorbellSubject, workerQueue } from './subjects.ts';

/**
 * A doorbell says only "look at the inbox of this target". The row is the truth: the payload carries
 * no work, and a lost or duplicated bell only delays or repeats a cheap claim attempt.
 */
export const Doorbell = z.object({
  instance: z.string().min(1),
  target: z.string().min(1),
  reason: z.enum(['enqueue', 'watchdog', 'manual']),
  at_ms: z.number().int().nonnegative(),
});
export type Doorbell = z.infer<typeof Doorbell>;

export type RingFn = (target: string, reason: Doorbell['reason']) => void;

/** Rings a target's doorbell (fire and forget: Core NATS, at most once). */
export function ringDoorbell(
  nc: NatsConnection,
  instance: string,
  target: string,
  reason: Doorbell['reason'],
): boolean {
  const bell: Doorbell = { instance, target, reason, at_ms: Date.now() };
  try {
    nc.publish(doorbellSubject(target), JSON.stringify(bell), traceHeaders());
    return true;
  } catch {
    // Lossy by contract (NATS closed or reconnecting past its buffer): the watchdog rings again.
    return false;
  }
}

export function ringer(nc: NatsConnection, instance: string): RingFn {
  return (target, reason) => ringDoorbell(nc, instance, target, reason);
}

/**
 * Listens to a target's doorbell in the instance's queue group (one worker per bell). A malformed or
 * foreign bell is logged and ignored: the watchdog re-rings whatever is due.
 */
export function subscribeDoorbell(
  nc: NatsConnection,
  instance: string,
  target: string,
  onRing: (bell: Doorbell) => void,
  log?: Logger,
): Subscription {
  return nc.subscribe(doorbellSubject(target), {
    queue: workerQueue(instance, target),
    callback: (err, msg) => {
      if (err) {
        log?.warn(
          { event_type: 'doorbell_error', target, error: err.message },
          'doorbell subscription error',
        );
        return;
      }
      const raw = jsonOf(msg);
      const bell = Doorbell.safeParse(raw);
      if (!bell.success || bell.data.target !== target || bell.data.instance !== instance) {
        log?.warn({ event_type: 'doorbell_invalid', target }, 'ignored a malformed doorbell');
        return;
      }
      onRing(bell.data);
    },
  });
}
