import { seeded } from '../../src/common/seeded.ts';
import { embedText } from '../../test/harness/embeddings.ts';

/**
 * The bench's synthetic memories and queries: an operations agent's notes drawn from a vocabulary
 * (services, events, places, details; the common ones far more often than the rare, as in real notes),
 * each with a ticket number, so no two are the same words. Vectors are the scripted embeddings'
 * (embedText), summed from a per-word cache: the same vectors, a hundred times faster.
 */

// None of these words is one of the fixture's queries' words (as Postgres stems them) or in the scripted
// embeddings' thesaurus: the fixture's answers stay the only right answers to its queries, among
// however many of these.
const SERVICES =
  'checkout payments search orders inventory auth gateway notifications reporting catalog pricing shipping ledger scheduler importer exporter mailer sessions profiles media thumbnails recommendations fraud-check tax subscriptions analytics audit storage queue ingest telemetry geo maps chat support-portal onboarding'.split(
    ' ',
  );
const EVENTS = [
  'config change applied',
  'pods restarted',
  'memory leak',
  'slow queries',
  'replication lag',
  'backup finished',
  'migration applied',
  'rate limit hit',
  'queue backlog',
  'crash loop',
  'dns timeouts',
  'flaky test',
  'cpu throttling',
  'health check flapping',
  'oom kill',
  'node drained',
  'autoscaler stuck',
  'secret rotated',
  'quota exceeded',
  'cron job skipped',
  'traffic surge',
  'packet loss',
  'schema drift',
  'index bloat',
  'lock contention',
  'retry storm',
  'job timed out',
  'feature flag flipped',
  'dependency upgraded',
  'image rebuilt',
  'storage quota warning',
  'audit finding',
];
const PLACES =
  'production staging eu-west us-east ap-south canary the-batch-window the-nightly-job kubernetes the-edge'.split(
    ' ',
  );
const DETAILS = [
  'after the ORM upgrade',
  'during the Monday import',
  'when traffic doubled',
  'since the last build',
  'for eleven minutes',
  'traced to a missing index',
  'traced to a stale secret',
  'fixed by a restart',
  'the primary node saturated',
  'retries with backoff absorbed it',
  'the on-call engineer paged twice',
  'totals off by a cent',
  'rolled forward with a patch',
  'back to normal within the hour',
  'needs a follow-up ticket',
  'vendor ticket opened',
  'the canary caught it',
  'the dashboard showed nothing',
  'logs rotated to free space',
  'the queue drained within the hour',
  'warmed the pools before the peak',
  'feature flag turned off',
  'the runbook step was missing',
  'security review pending',
  'signed by the platform lead',
  'a serializer change broke parsing',
  'the upstream api was slow',
  'storage ran hot',
  'worth a runbook entry',
  'traced to a noisy neighbour',
];

/** A skewed pick: index 0 most often, the last rarely (roughly Zipf-like). */
function pick<T>(xs: readonly T[], r: () => number): T {
  return xs[Math.floor(xs.length * r() ** 2)] as T;
}

/** A deterministic generator (mulberry32), so every run writes the same corpus. */
export const generator = seeded;

/** The n-th synthetic memory (unique by its ticket number). */
export function memoryText(n: number, r: () => number): string {
  const place = pick(PLACES, r).replaceAll('-', ' ');
  const lead = `${pick(SERVICES, r)} ${pick(EVENTS, r)} in ${place}: ${pick(DETAILS, r)}`;
  const more = r() < 0.5 ? `; ${pick(SERVICES, r)} ${pick(EVENTS, r)}` : '';
  return `${lead}${more} (ticket OPS-${100_000 + n}).`;
}

/** A recall query as an agent would word it: a few of the vocabulary's words, sometimes a sentence. */
export function queryText(r: () => number): string {
  const service = pick(SERVICES, r);
  const event = pick(EVENTS, r);
  const place = pick(PLACES, r).replaceAll('-', ' ');
  switch (Math.floor(r() * 4)) {
    case 0:
      return `${service} ${event}`;
    case 1:
      return `${event} in ${place}`;
    case 2:
      return `what happened with the ${service} ${event} in ${place}?`;
    default:
      return `${service} ${pick(DETAILS, r)}`;
  }
}

const WORDS = /[\p{L}\p{N}-]+/gu;

/**
 * embedText's vector, summed from each word's own vector (embedText of the word alone: its unit
 * direction, zero for a stop word) and normalised: what embedText(text, dim) computes, without hashing
 * every word again for every text.
 */
export function embedder(dim: number): (text: string) => number[] {
  const cache = new Map<string, number[]>();
  return (text) => {
    const v = new Array<number>(dim).fill(0);
    for (const w of text.toLowerCase().match(WORDS) ?? []) {
      let d = cache.get(w);
      if (!d) {
        d = embedText(w, dim);
        cache.set(w, d);
      }
      for (let i = 0; i < dim; i++) v[i]! += d[i]!;
    }
    const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    return n === 0 ? v : v.map((x) => x / n);
  };
}
