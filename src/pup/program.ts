import { Option } from 'commander';
import { type ProgramSpec, secretsEpilog } from '../common/program.ts';
import { TRACING_SETTINGS } from '../telemetry/settings.ts';

/** Credentials: environment only. */
export const PUP_SECRETS = [
  'REDIS_URL',
  'DATABASE_URL',
  'NATS_URL',
  'HOLT_LLM_API_KEY',
  'OTEL_EXPORTER_OTLP_HEADERS',
];

/** `holt pup`'s command line (src/common/program.ts); Holt's variables first, defaults in brackets. */
export const PUP_PROGRAM: ProgramSpec = {
  name: 'holt pup',
  description:
    "Run an agent's pup: it bids on claims, runs the agent's tool (or LLM loop) on grants and writes the result to the blackboard. Each setting is a flag or an environment variable; the flag wins.",
  options: [new Option('--execute-claim <id>', 'worker mode: run this one grant (a claim UUID) and exit')],
  passThrough: 'ignored: Holt passes the agent command after the pup',
  settings: [
    { env: 'HOLT_INSTANCE_NAME', flag: 'instance', help: 'the Holt instance (required)' },
    { env: 'HOLT_AGENT_NAME', flag: 'role', help: "the agent's role (required)" },
    { env: 'HOLT_AGENT_COMMAND', help: 'the tool, a JSON argv (required unless an LLM executes)' },
    { env: 'HOLT_BIDDING_STRATEGY', help: 'review, claim, exclusive or ignore' },
    { env: 'HOLT_AGENT_BID_SCRIPT', help: 'a JSON argv that prints the bid (wins over the strategy)' },
    { env: 'HOLT_MODE', help: 'standard, controller or worker [standard]' },
    { env: 'HOLT_PROMPT_CLAIM', help: 'prompt text given to the bid' },
    { env: 'HOLT_PROMPT_EXECUTION', help: 'prompt text given to the tool' },
    { env: 'HOLT_HEALTH_PORT', help: 'port of /healthz and /metrics [8080]' },
    { env: 'HOLT_WORKSPACE', help: "the agent's working tree [/workspace]" },
    { env: 'HOLT_TOOL_TIMEOUT_MS', help: 'a tool run is killed after this [300000]' },
    { env: 'HOLT_TOOL_OUTPUT_LIMIT_BYTES', help: "a tool's stdout cap [10485760]" },
    { env: 'HOLT_MAX_PAYLOAD_BYTES', help: "an artefact's payload cap; larger is a Failure [1048576]" },
    { env: 'HOLT_BID_SCRIPT_TIMEOUT_MS', help: 'a bid script is killed after this [10000]' },
    { env: 'HOLT_EXECUTION_LEASE_MS', help: "the Redis lease on a grant's execution [15000]" },
    { env: 'HOLT_RESCAN_INTERVAL_MS', help: 'the re-scan for grants whose announcement was lost [5000]' },
    {
      env: 'HOLT_GRANT_QUEUE',
      help: 'grants waiting for the executor at most; bidding pauses while full [64]',
    },
    { env: 'HOLT_BID_CONCURRENCY', help: 'claims bid on at once (bid scripts run side by side) [4]' },
    { env: 'HOLT_ERROR_BACKOFF_MS', help: 'first pause after a run ends in error, doubling [1000]' },
    { env: 'HOLT_REDIS_RETRIES', help: 'tries of a Redis write before the run fails [3]' },
    {
      env: 'HOLT_STORE_WAIT_MS',
      help: 'how long start waits for Redis (a Service not resolvable yet) before exiting [180000]',
    },
    { env: 'HOLT_SHUTDOWN_GRACE_MS', help: 'how long SIGTERM waits for a running tool [25000]' },
    { env: 'HOLT_HEALTH_CHECK_COMMAND', help: 'a JSON argv run as the custom health check' },
    { env: 'HOLT_HEALTH_CHECK_INTERVAL_MS', help: 'how often the health check runs [30000]' },
    { env: 'HOLT_HEALTH_CHECK_TIMEOUT_MS', help: 'the health check is killed after this [5000]' },
    { env: 'HOLT_TOOL_RUNNER_SOCKET', help: "in a pod: the agent container's tool runner socket" },
    {
      env: 'HOLT_TOOL_WORKSPACE',
      help: 'where the tool runner sees the workspace, if elsewhere [HOLT_WORKSPACE]',
    },
    ...TRACING_SETTINGS,
  ],
  epilog: [
    secretsEpilog(PUP_SECRETS),
    'LLM agents: HOLT_LLM_* and HOLT_BUDGET_*; inbox workers: HOLT_WORKER_*; Postgres timeouts: HOLT_PG_*.',
    'Reference: docs/configuration.md. Exit codes: 0 stopped by a signal or done, 78 bad configuration, 70 a bug.',
  ].join('\n'),
};
