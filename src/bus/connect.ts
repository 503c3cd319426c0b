import { connect, type NatsConnection } from '@nats-io/transport-node';
import { redactUrl } from '../common/logger.ts';

/** Connects to NATS, reconnecting for ever (a doorbell lost meanwhile is re-rung by the watchdog). */
export async function connectBus(url: string, name: string): Promise<NatsConnection> {
  try {
    return await connect({ servers: url, name, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
  } catch (e) {
    throw new Error(
      `cannot connect to NATS at ${redactUrl(url)}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
}
