import type { Redis } from 'ioredis';

/** One command as MONITOR reports it, and whether a Lua script sent it. */
export interface Monitored {
  args: string[];
  fromScript: boolean;
}

/**
 * A MONITOR connection that records every command into `into`. ioredis marks the connection as
 * monitoring only a tick after the server's OK, so a monitor line in the same TCP chunk as the OK
 * is taken for a reply with no command and rejects `monitor()` ("Command queue state error"); that
 * start is retried. Lines still arriving while it disconnects raise the same error, which is the end
 * of a stream the test has read, not a fault.
 */
export async function monitorCommands(redis: Redis, into: Monitored[], attempts = 5): Promise<Redis> {
  for (let attempt = 1; ; attempt++) {
    try {
      const monitor = await redis.monitor();
      monitor.on('error', () => undefined);
      monitor.on('monitor', (_t: string, args: string[], source: string) =>
        into.push({ args, fromScript: source === 'lua' }),
      );
      return monitor;
    } catch (err) {
      if (attempt >= attempts || !String(err).includes('Command queue state error')) throw err;
    }
  }
}
