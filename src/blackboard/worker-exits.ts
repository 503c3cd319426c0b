import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * A worker that died with a claim in hand, as whoever launched it saw it (the local supervisor, or
 * the operator from the pod's status): Holt's orchestrator watches its worker containers the same way.
 * `owner` is the worker's inbox lease owner (its pod name). `at_ms`: when it died; only leases it held
 * then are released (a restarted container of the same pod keeps what it took since).
 */
export const WorkerExit = z.object({
  owner: z.string().min(1).max(253),
  role: z.string().min(1).max(253),
  /** The exit code; 128 + n after signal n, as container runtimes report it. */
  exit_code: z.number().int(),
  signal: z.string().max(32).optional(),
  /** The runtime's word for it, when it has one (OOMKilled, Error). */
  reason: z.string().max(64).optional(),
  /** Its last log lines (at most 100), credentials already cut out by the writer. */
  logs: z.string().max(256 * 1024),
  at_ms: z.number().int().nonnegative(),
});
export type WorkerExit = z.infer<typeof WorkerExit>;

/** How many reports the stream keeps; the orchestrator reads them within seconds. */
const KEEP = 1000;

/** Appends one report (the writer has scrubbed it). */
export async function reportWorkerExit(redis: Redis, key: string, e: WorkerExit): Promise<void> {
  const r = WorkerExit.parse(e);
  await redis.xadd(key, 'MAXLEN', '~', String(KEEP), '*', 'report', JSON.stringify(r));
}

/**
 * Reports after stream id `after` ('0' for all kept), oldest first, with the id to read on from.
 * An entry that does not parse is skipped and counted: never acted on, never fatal.
 */
export async function readWorkerExits(
  redis: Redis,
  key: string,
  after: string,
  count = 500,
): Promise<{ exits: WorkerExit[]; last: string; invalid: number }> {
  const rows = await redis.xrange(key, `(${after}`, '+', 'COUNT', count);
  const exits: WorkerExit[] = [];
  let invalid = 0;
  for (const [, fields] of rows) {
    const i = fields.indexOf('report');
    let parsed: ReturnType<typeof WorkerExit.safeParse> | undefined;
    try {
      parsed = i >= 0 ? WorkerExit.safeParse(JSON.parse(fields[i + 1] ?? '')) : undefined;
    } catch {
      parsed = undefined;
    }
    if (parsed?.success) exits.push(parsed.data);
    else invalid++;
  }
  return { exits, last: rows.at(-1)?.[0] ?? after, invalid };
}

/** Holt's WorkerFailure payload: the exit and the last log lines. */
export function workerFailurePayload(e: WorkerExit): string {
  const how = e.signal ? ` (${e.signal})` : e.reason ? ` (${e.reason})` : '';
  return `Worker container exited with code ${e.exit_code}${how}\n\nLogs:\n${e.logs}`;
}
