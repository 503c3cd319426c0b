import { headers, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { carrierOf, parseCarrier, type TraceCarrier } from '../telemetry/carrier.ts';

/** A message's JSON body, or undefined when it is not JSON (the caller's schema then refuses it). */
export function jsonOf(msg: Pick<Msg, 'json'>): unknown {
  try {
    return msg.json();
  } catch {
    return undefined;
  }
}

/**
 * The active span's W3C trace context as NATS headers (`traceparent`, `tracestate`), for a publish's
 * options; none outside a span. A subscriber that traces continues it (traceOf).
 */
export function traceHeaders(): { headers?: MsgHdrs } {
  const c = carrierOf();
  if (!c) return {};
  const h = headers();
  h.set('traceparent', c.traceparent);
  if (c.tracestate) h.set('tracestate', c.tracestate);
  return { headers: h };
}

/** A received message's trace context: parsed (a publisher is untrusted), a malformed one dropped. */
export function traceOf(msg: Pick<Msg, 'headers'>): TraceCarrier | undefined {
  const get = (k: string) => msg.headers?.get(k) || undefined;
  return parseCarrier({ traceparent: get('traceparent'), tracestate: get('tracestate') });
}

/** A NATS request with these headers; its answer's text, or it throws (no responder, timeout). */
export async function requestWithHeaders(
  nc: NatsConnection,
  subject: string,
  body: string,
  h: Record<string, string>,
  timeoutMs: number,
): Promise<string> {
  const hs = headers();
  for (const [k, v] of Object.entries(h)) hs.set(k, v);
  return (await nc.request(subject, body, { timeout: timeoutMs, headers: hs })).string();
}
