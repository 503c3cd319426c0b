import { type ProgramSpec, secretsEpilog } from '../common/program.ts';
import { TRACING_SETTINGS } from '../telemetry/settings.ts';

/** Credentials: environment only. */
export const ORCHESTRATOR_SECRETS = ['REDIS_URL', 'DATABASE_URL', 'NATS_URL'];

/** `holt orchestrator`'s command line (src/common/program.ts); defaults in brackets. */
export const ORCHESTRATOR_PROGRAM: ProgramSpec = {
  name: 'holt orchestrator',
  description:
    "Run one Holt's orchestrator: claims, consensus bidding, grants, the inbox watchdog and retention. Each setting is a flag or an environment variable; the flag wins.",
  settings: [
    { env: 'HOLT_INSTANCE_NAME', flag: 'instance', help: 'the Holt instance (required)' },
    {
      env: 'HOLT_ORCHESTRATOR_CONFIG',
      flag: 'config',
      help: 'a YAML/JSON file of the same settings in snake_case',
    },
    { env: 'HOLT_HEALTH_PORT', help: 'port of /healthz, /readyz and /metrics [8080]' },
    { env: 'HOLT_BID_TIMEOUT_MS', help: 'how long consensus waits for bids [30000]' },
    {
      env: 'HOLT_MAX_BID_TIMEOUT_MS',
      help: "the widest a slow bidder's own window grows after late bids [4 × the bid timeout]",
    },
    {
      env: 'HOLT_MAX_REVIEW_ITERATIONS',
      help: 'rework rounds before a claim is terminated; 0: no limit [3]',
    },
    { env: 'HOLT_RECONCILE_INTERVAL_MS', help: 'the reconcile pass for missed events [1000]' },
    { env: 'HOLT_BID_POLL_MS', help: "first re-read of a waiting claim's bids [1000]" },
    { env: 'HOLT_LEASE_TTL_MS', help: 'the single-leader lease [10000]' },
    { env: 'HOLT_STANDBY_POLL_MS', help: 'how often a standby tries the lease [1000]' },
    { env: 'HOLT_ARTEFACT_LOOKBACK_MS', help: 'artefacts the reconcile pass re-checks [60000]' },
    { env: 'HOLT_REDISPATCH_AFTER_MS', help: 'a grant without output is announced again after this [30000]' },
    { env: 'HOLT_LOAD_INTERVAL_MS', help: "how often the leader publishes each role's open grants [2000]" },
    { env: 'HOLT_TARGET_CACHE_BYTES', help: "memory bound of the claims' cached targets [67108864]" },
    {
      env: 'HOLT_RETENTION_DAYS',
      help: 'finished workflows older than this leave the stores; 0 keeps all [7]',
    },
    { env: 'HOLT_RETENTION_SWEEP_MS', help: 'how often the leader prunes [3600000]' },
    { env: 'HOLT_INBOX_WATCHDOG_MS', help: 'inbox watchdog sweep [2000]' },
    { env: 'HOLT_INBOX_MAX_ATTEMPTS', help: 'a worker row failed this often becomes a Failure [3]' },
    {
      env: 'HOLT_INGRESS_PORT',
      help: "living agents' ingress (POST /v1/agents/{role}/messages|wake); 0 is off [0]",
    },
    {
      env: 'HOLT_INGRESS_TOKENS_FILE',
      help: 'the hashed ingress tokens (holt token, or the Secret the operator writes) [/etc/holt/ingress/tokens.json]',
    },
    { env: 'HOLT_INGRESS_MAX_CONNECTIONS', help: 'open ingress connections in all [1024]' },
    { env: 'HOLT_INGRESS_MAX_PER_SOURCE', help: 'open ingress connections from one address [128]' },
    {
      env: 'HOLT_INGRESS_AUTH_FAILURES',
      help: 'failed authentications from one address before it gets 429 [20]',
    },
    { env: 'HOLT_INGRESS_AUTH_WINDOW_MS', help: 'the window those failures are counted in [60000]' },
    { env: 'HOLT_INGRESS_HEADERS_TIMEOUT_MS', help: "a request's head must arrive within this [10000]" },
    {
      env: 'HOLT_INGRESS_BODY_TIMEOUT_MS',
      help: "an admitted request's body must arrive within this [10000]",
    },
    {
      env: 'HOLT_INGRESS_MAX_UNDELIVERED',
      help: "an agent's undelivered messages before the ingress answers 429 [1000]",
    },
    {
      env: 'HOLT_INGRESS_IDEMPOTENCY_DAYS',
      help: 'how long idempotency keys (hashes) are kept, past the messages [365]',
    },
    ...TRACING_SETTINGS,
  ],
  epilog: [
    secretsEpilog(ORCHESTRATOR_SECRETS),
    'Postgres timeouts: HOLT_PG_* environment variables. Log level: HOLT_LOG_LEVEL.',
    'Reference: docs/configuration.md. Exit codes: 0 stopped by a signal, 78 bad configuration, 70 a bug.',
  ].join('\n'),
};
