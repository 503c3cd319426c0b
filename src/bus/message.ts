import type { Msg } from '@nats-io/transport-node';

/** A message's JSON body, or undefined when it is not JSON (the caller's schema then refuses it). */
export function jsonOf(msg: Pick<Msg, 'json'>): unknown {
  try {
    return msg.json();
  } catch {
    return undefined;
  }
}
