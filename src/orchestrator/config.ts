import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError, formatIssues } from '../common/config.ts';

/** Settings of one orchestrator; env wins over the optional config file, which wins over defaults. */
export interface OrchestratorConfig {
  instance: string;
  redisUrl: string;
  bidTimeoutMs: number;
  /**
   * The widest a slow bidder's own bid window may grow (bid-windows.ts: late bids widen it from
   * bidTimeoutMs); at least bidTimeoutMs, which disables the adaptation. Default 4 × bidTimeoutMs.
   */
  maxBidTimeoutMs: number;
  /** 0 = unlimited. */
  maxReviewIterations: number;
  healthPort: number;
  reconcileIntervalMs: number;
  /** How often a claim collecting bids re-reads its bids hash (bid_submitted events also wake it). */
  bidPollMs: number;
  leaseTtlMs: number;
  /** How often a standby tries to take the lease. */
  standbyPollMs: number;
  /** How far back (by created_at_ms) the reconcile loop re-checks artefacts for missed events. */
  artefactLookbackMs: number;
  /**
   * A grant recorded this long ago whose agent has written nothing is announced again (the first
   * announcement may have failed or been lost; dispatchers are idempotent).
   */
  redispatchAfterMs: number;
  /** How often the leader publishes each role's open grants (`agent_load`, the Agents' claimsInFlight). */
  loadIntervalMs: number;
  /** Bound on the memory of the claims' cached target artefacts (payloads included). */
  targetCacheBytes: number;
  /** Finished workflows older than this many days leave Redis and Postgres; 0 keeps everything. */
  retentionDays: number;
  /** How often the leader runs a retention pass. */
  retentionSweepMs: number;
}

const ms = z.coerce.number().int().nonnegative();
const positiveMs = z.coerce.number().int().positive();

const FileSchema = z
  .object({
    instance: z.string().min(1),
    redis_url: z.string().min(1),
    bid_timeout_ms: positiveMs,
    max_bid_timeout_ms: positiveMs,
    max_review_iterations: z.coerce.number().int().nonnegative(),
    health_port: z.coerce.number().int().min(0).max(65535),
    reconcile_interval_ms: positiveMs,
    bid_poll_ms: positiveMs,
    lease_ttl_ms: positiveMs,
    standby_poll_ms: positiveMs,
    artefact_lookback_ms: ms,
    redispatch_after_ms: positiveMs,
    load_interval_ms: positiveMs,
    target_cache_bytes: z.coerce.number().int().positive(),
    retention_days: z.coerce.number().nonnegative(),
    retention_sweep_ms: positiveMs,
  })
  .partial()
  .strict();

export const EnvSchema = z.object({
  HOLT_INSTANCE_NAME: z.string().min(1).optional(),
  REDIS_URL: z.string().min(1).optional(),
  HOLT_BID_TIMEOUT_MS: positiveMs.optional(),
  HOLT_MAX_BID_TIMEOUT_MS: positiveMs.optional(),
  HOLT_MAX_REVIEW_ITERATIONS: z.coerce.number().int().nonnegative().optional(),
  HOLT_HEALTH_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  HOLT_RECONCILE_INTERVAL_MS: positiveMs.optional(),
  HOLT_BID_POLL_MS: positiveMs.optional(),
  HOLT_LEASE_TTL_MS: positiveMs.optional(),
  HOLT_STANDBY_POLL_MS: positiveMs.optional(),
  HOLT_ARTEFACT_LOOKBACK_MS: ms.optional(),
  HOLT_REDISPATCH_AFTER_MS: positiveMs.optional(),
  HOLT_LOAD_INTERVAL_MS: positiveMs.optional(),
  HOLT_TARGET_CACHE_BYTES: z.coerce.number().int().positive().optional(),
  HOLT_RETENTION_DAYS: z.coerce.number().nonnegative().optional(),
  HOLT_RETENTION_SWEEP_MS: positiveMs.optional(),
  HOLT_ORCHESTRATOR_CONFIG: z.string().min(1).optional(),
});

/** The default maximum bid window, as a multiple of the bid timeout. */
export const MAX_BID_TIMEOUT_FACTOR = 4;

export const DEFAULTS = {
  bidTimeoutMs: 30_000,
  maxReviewIterations: 3,
  healthPort: 8080,
  reconcileIntervalMs: 1_000,
  bidPollMs: 1_000,
  leaseTtlMs: 10_000,
  standbyPollMs: 1_000,
  artefactLookbackMs: 60_000,
  redispatchAfterMs: 30_000,
  loadIntervalMs: 2_000,
  targetCacheBytes: 64 * 1024 * 1024,
  retentionDays: 7,
  retentionSweepMs: 3_600_000,
} as const;

function readFile(path: string): z.infer<typeof FileSchema> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`HOLT_ORCHESTRATOR_CONFIG: cannot read ${path}: ${(e as Error).message}`);
  }
  let raw: unknown;
  try {
    // YAML is a superset of JSON, so one parser reads both.
    raw = parseYaml(text) ?? {};
  } catch (e) {
    throw new ConfigError(`${path}: not valid YAML/JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  const r = FileSchema.safeParse(raw);
  if (!r.success) throw new ConfigError(`${path}: ${formatIssues(r.error)}`);
  return r.data;
}

/** Reads the environment and the optional config file; a problem is a ConfigError naming the setting. */
export function loadConfig(env: NodeJS.ProcessEnv): OrchestratorConfig {
  // An empty variable means "not set" (what a blank line in a manifest usually intends).
  const r = EnvSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!r.success) throw new ConfigError(`invalid configuration: ${formatIssues(r.error)}`);
  const e = r.data;
  const f = e.HOLT_ORCHESTRATOR_CONFIG ? readFile(e.HOLT_ORCHESTRATOR_CONFIG) : {};
  const instance = e.HOLT_INSTANCE_NAME ?? f.instance;
  const redisUrl = e.REDIS_URL ?? f.redis_url;
  if (!instance) throw new ConfigError('HOLT_INSTANCE_NAME: required');
  if (!redisUrl) throw new ConfigError('REDIS_URL: required');
  if (!/^rediss?:\/\//.test(redisUrl))
    throw new ConfigError('REDIS_URL: must start with redis:// or rediss://');
  const bidTimeoutMs = e.HOLT_BID_TIMEOUT_MS ?? f.bid_timeout_ms ?? DEFAULTS.bidTimeoutMs;
  const cfg: OrchestratorConfig = {
    instance,
    redisUrl,
    bidTimeoutMs,
    maxBidTimeoutMs:
      e.HOLT_MAX_BID_TIMEOUT_MS ?? f.max_bid_timeout_ms ?? MAX_BID_TIMEOUT_FACTOR * bidTimeoutMs,
    maxReviewIterations:
      e.HOLT_MAX_REVIEW_ITERATIONS ?? f.max_review_iterations ?? DEFAULTS.maxReviewIterations,
    healthPort: e.HOLT_HEALTH_PORT ?? f.health_port ?? DEFAULTS.healthPort,
    reconcileIntervalMs:
      e.HOLT_RECONCILE_INTERVAL_MS ?? f.reconcile_interval_ms ?? DEFAULTS.reconcileIntervalMs,
    bidPollMs: e.HOLT_BID_POLL_MS ?? f.bid_poll_ms ?? DEFAULTS.bidPollMs,
    leaseTtlMs: e.HOLT_LEASE_TTL_MS ?? f.lease_ttl_ms ?? DEFAULTS.leaseTtlMs,
    standbyPollMs: e.HOLT_STANDBY_POLL_MS ?? f.standby_poll_ms ?? DEFAULTS.standbyPollMs,
    artefactLookbackMs: e.HOLT_ARTEFACT_LOOKBACK_MS ?? f.artefact_lookback_ms ?? DEFAULTS.artefactLookbackMs,
    redispatchAfterMs: e.HOLT_REDISPATCH_AFTER_MS ?? f.redispatch_after_ms ?? DEFAULTS.redispatchAfterMs,
    loadIntervalMs: e.HOLT_LOAD_INTERVAL_MS ?? f.load_interval_ms ?? DEFAULTS.loadIntervalMs,
    targetCacheBytes: e.HOLT_TARGET_CACHE_BYTES ?? f.target_cache_bytes ?? DEFAULTS.targetCacheBytes,
    retentionDays: e.HOLT_RETENTION_DAYS ?? f.retention_days ?? DEFAULTS.retentionDays,
    retentionSweepMs: e.HOLT_RETENTION_SWEEP_MS ?? f.retention_sweep_ms ?? DEFAULTS.retentionSweepMs,
  };
  if (cfg.maxBidTimeoutMs < cfg.bidTimeoutMs)
    throw new ConfigError(
      `HOLT_MAX_BID_TIMEOUT_MS: must be at least the bid timeout (${cfg.bidTimeoutMs} ms), got ${cfg.maxBidTimeoutMs}`,
    );
  if (cfg.leaseTtlMs < 3 * 50) throw new ConfigError('lease TTL: must be at least 150 ms');
  return cfg;
}
