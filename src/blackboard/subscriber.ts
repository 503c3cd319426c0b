import { Redis } from 'ioredis';
import type { z } from 'zod';

export interface Subscription {
  close(): Promise<void>;
}

export type OnInvalid = (channel: string, raw: string, error: Error) => void;

/**
 * Pub/sub on a dedicated connection (ioredis re-subscribes after a reconnect). Each message is parsed
 * with `schema`; a malformed one goes to `onInvalid` and never reaches the handler or throws.
 * Pub/sub is at-most-once: callers must also reconcile from stored state.
 */
export async function subscribe<S extends z.ZodType>(
  url: string,
  channels: string[],
  schema: S,
  handler: (msg: z.infer<S>, channel: string) => void,
  onInvalid: OnInvalid,
  opts: {
    /** Called once subscribed again after a reconnect: whatever was published meanwhile is lost. */
    onResubscribed?: () => void;
    /** A cheap look at the raw text first: false drops the message unparsed (traffic the caller ignores). */
    accept?: (channel: string, raw: string) => boolean;
  } = {},
): Promise<Subscription> {
  const { onResubscribed, accept } = opts;
  // Re-subscribed by hand on each reconnect: ioredis' own autoResubscribe sends SUBSCRIBE without a
  // catch, so closing the connection while that is in flight (an orchestrator that lost its lease just
  // as Redis came back) was an unhandled rejection that killed the process.
  const sub = new Redis(url, { maxRetriesPerRequest: null, autoResubscribe: false });
  sub.on('error', () => {
    // reconnects on its own; errors surface through the readers' health checks
  });
  let connected = false;
  sub.on('ready', () => {
    if (!connected) {
      connected = true;
      return;
    }
    // Its reply marks the moment from which nothing more is missed.
    sub.subscribe(...channels).then(
      () => onResubscribed?.(),
      () => {
        // closed, or the connection went again: the next 'ready' tries once more
      },
    );
  });
  sub.on('message', (channel: string, raw: string) => {
    if (accept && !accept(channel, raw)) return;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (e) {
      onInvalid(channel, raw, e as Error);
      return;
    }
    const parsed = schema.safeParse(value);
    if (!parsed.success) {
      onInvalid(
        channel,
        raw,
        new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')),
      );
      return;
    }
    handler(parsed.data, channel);
  });
  try {
    await sub.subscribe(...channels);
  } catch (e) {
    sub.disconnect();
    throw e;
  }
  return {
    async close() {
      sub.disconnect();
    },
  };
}
