import type { Redis } from 'ioredis';
import { z } from 'zod';
import { readJsonKey, writeJsonKey } from './json-key.ts';

const n = z.number().int().nonnegative();

/** What the leader's retention passes removed, per store (Postgres absent without an inbox). */
export const PrunedCounts = z.object({
  workflows: n.default(0),
  artefacts: n.default(0),
  claims: n.default(0),
  turns: n.default(0),
  inbox_rows: n.default(0),
  usage_rows: n.default(0),
});
export type PrunedCounts = z.infer<typeof PrunedCounts>;

/**
 * The leader's retention report (`holt:{i}:retention`, an extension): the setting, the last pass and
 * the totals since the instance began, so `holt status` and the Holt's Kubernetes status show what
 * retention does without reading the work itself.
 */
export const RetentionReport = z.object({
  days: z.number().nonnegative(),
  last_pass_ms: n,
  duration_ms: n,
  last: PrunedCounts,
  total: PrunedCounts,
  /** Old workflows the last pass kept: still running (or waiting), unreadable, too large. */
  kept: z.record(z.string(), n).default({}),
  /** Why the last pass failed, if it did (the next one retries). */
  error: z.string().optional(),
});
export type RetentionReport = z.infer<typeof RetentionReport>;

export const NO_PRUNE: PrunedCounts = {
  workflows: 0,
  artefacts: 0,
  claims: 0,
  turns: 0,
  inbox_rows: 0,
  usage_rows: 0,
};

export function addCounts(a: PrunedCounts, b: PrunedCounts): PrunedCounts {
  const out = { ...a };
  for (const k of Object.keys(out) as (keyof PrunedCounts)[]) out[k] += b[k];
  return out;
}

export async function writeRetentionReport(redis: Redis, key: string, r: RetentionReport): Promise<void> {
  await writeJsonKey(redis, key, r);
}

/** The last report, or null before any pass. Throws BlackboardDataError if malformed. */
export function readRetentionReport(redis: Redis, key: string): Promise<RetentionReport | null> {
  return readJsonKey(redis, key, RetentionReport, 'retention report');
}
