import { setTimeout as sleep } from 'node:timers/promises';

export interface EventuallyOptions {
  /** Only stops a broken test from hanging: tests wait on conditions and never assert on timings. */
  timeoutMs?: number;
  intervalMs?: number;
  /** Extra context for the failure message (what the system looked like when it gave up). */
  describe?: () => Promise<string> | string;
}

/**
 * Polls `check` until it returns a value other than undefined, null or false; a throw counts as "not
 * yet" and the last one is reported if it never happens. The one poller every test builds on.
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  opts: EventuallyOptions = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let last = '';
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
    }
    if (Date.now() > deadline) {
      const extra = opts.describe ? `\n${await opts.describe()}` : '';
      throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ''}${extra}`);
    }
    await sleep(opts.intervalMs ?? 50);
  }
}
