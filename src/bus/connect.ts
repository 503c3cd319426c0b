import { type ConnectionOptions, connect, type NatsConnection } from '@nats-io/transport-node';
import { errorMessage } from '../common/errors.ts';
import { redactUrl } from '../common/logger.ts';

/**
 * The server and the credentials of a NATS URL, apart. nats.js splits `host:port` itself and, given
 * `nats://user:pass@host:4222`, takes a password that starts with digits for the port (a generated hex
 * password does so 10 times in 16): the credentials go in their own options instead.
 */
export function natsServer(url: string): Pick<ConnectionOptions, 'servers' | 'user' | 'pass'> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { servers: url };
  }
  if (!u.username && !u.password) return { servers: url };
  const user = decodeURIComponent(u.username);
  const pass = decodeURIComponent(u.password);
  u.username = '';
  u.password = '';
  return { servers: u.toString().replace(/\/$/, ''), user, ...(pass ? { pass } : {}) };
}

/**
 * Why a connection can no longer work, or null. nats.js gives up for good on some errors (the same
 * auth error twice in a row, say) even with endless reconnects: the process must then be restarted,
 * so every /healthz that depends on NATS reports this.
 */
export function busProblem(nc: Pick<NatsConnection, 'isClosed'> | undefined): string | null {
  return nc?.isClosed() ? 'NATS connection closed for good' : null;
}

/**
 * Follows a connection's disconnects and reconnects: `problem()` says why it cannot publish now
 * (reconnecting, or closed for good), or null. For /readyz: a store outage makes a process unready,
 * not dead (restarting it would not help).
 */
export function watchBus(nc: NatsConnection): { problem(): string | null } {
  let connected = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnecting') connected = false;
      else if (s.type === 'reconnect') connected = true;
    }
  })().catch(() => undefined);
  return { problem: () => busProblem(nc) ?? (connected ? null : 'NATS disconnected; reconnecting') };
}

/**
 * Connects to NATS, reconnecting for ever (a doorbell lost meanwhile is re-rung by the watchdog).
 * `ca`: verify the server by this CA (a server that requires TLS is upgraded to in any case).
 */
export async function connectBus(url: string, name: string, ca?: string): Promise<NatsConnection> {
  try {
    return await connect({
      ...natsServer(url),
      name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      ...(ca ? { tls: { ca } } : {}),
    });
  } catch (e) {
    throw new Error(`cannot connect to NATS at ${redactUrl(url)}: ${errorMessage(e)}`);
  }
}
