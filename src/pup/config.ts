import { z } from 'zod';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../blackboard/client.ts';
import { PUP_MODES, type PupMode } from '../blackboard/pup-mode.ts';
import { BID_TYPES } from '../blackboard/types.ts';
import { ConfigError, formatIssues, jsonArgv } from '../common/config.ts';
import { secretsFromEnv } from '../common/secrets.ts';
import { LocalToolRunner, type ToolRunner, WorkspaceMappedRunner } from './runner/runner.ts';
import { SocketToolRunner } from './runner/socket.ts';

const blankAsUndefined = (v: unknown) => (v === '' ? undefined : v);
/** An integer setting; unset or blank takes the default (coercing '' would give 0). */
const num = (def: number, min = 1, max = Number.MAX_SAFE_INTEGER) =>
  z.preprocess((v) => (v === '' || v === undefined ? def : v), z.coerce.number().int().min(min).max(max));

/** Holt's pup variables, then ours (HOLT_HEALTH_PORT onwards). */
export const PupEnvVars = z.object({
  HOLT_INSTANCE_NAME: z.string({ error: 'is required' }).min(1, 'is required'),
  HOLT_AGENT_NAME: z
    .string({ error: 'is required' })
    .regex(/^[A-Za-z0-9-]{1,64}$/, 'must be 1-64 characters of [A-Za-z0-9-] (the role)'),
  REDIS_URL: z
    .string({ error: 'is required' })
    .regex(/^rediss?:\/\/.+/, 'must be a redis:// or rediss:// URL'),
  HOLT_AGENT_COMMAND: z.preprocess(blankAsUndefined, jsonArgv.optional()),
  HOLT_BIDDING_STRATEGY: z.preprocess(
    blankAsUndefined,
    z.enum(BID_TYPES, { error: 'must be one of review, claim, exclusive, ignore' }).optional(),
  ),
  HOLT_AGENT_BID_SCRIPT: z.preprocess(blankAsUndefined, jsonArgv.optional()),
  HOLT_MODE: z.preprocess(
    blankAsUndefined,
    z.enum(PUP_MODES, { error: 'must be standard, controller or worker' }).optional(),
  ),
  HOLT_PROMPT_CLAIM: z.string().optional(),
  HOLT_PROMPT_EXECUTION: z.string().optional(),
  HOLT_HEALTH_PORT: num(8080, 0, 65535),
  HOLT_WORKSPACE: z.preprocess(blankAsUndefined, z.string().default('/workspace')),
  HOLT_TOOL_TIMEOUT_MS: num(5 * 60_000),
  HOLT_TOOL_OUTPUT_LIMIT_BYTES: num(10 * 1024 * 1024),
  /** An artefact's payload (UTF-8 bytes): a larger result becomes a Failure that names the cap. */
  HOLT_MAX_PAYLOAD_BYTES: num(DEFAULT_MAX_PAYLOAD_BYTES, 1),
  HOLT_BID_SCRIPT_TIMEOUT_MS: num(10_000),
  /** The Redis lease on a grant's execution, renewed every third of it while the run lasts. */
  HOLT_EXECUTION_LEASE_MS: num(15_000, 300),
  HOLT_RESCAN_INTERVAL_MS: num(5_000),
  HOLT_GRANT_QUEUE: num(64, 1, 10_000),
  HOLT_BID_CONCURRENCY: num(4, 1, 64),
  /** The first pause after a run ends in error; it doubles with each error in a row (to 60 s). */
  HOLT_ERROR_BACKOFF_MS: num(1_000, 1),
  HOLT_REDIS_RETRIES: num(3, 1, 20),
  /** How long start waits for Redis (and the model's stores) before giving up; 0: one try. */
  HOLT_STORE_WAIT_MS: num(180_000, 0),
  HOLT_SHUTDOWN_GRACE_MS: num(25_000, 0),
  HOLT_HEALTH_CHECK_COMMAND: z.preprocess(blankAsUndefined, jsonArgv.optional()),
  HOLT_HEALTH_CHECK_INTERVAL_MS: num(30_000),
  HOLT_HEALTH_CHECK_TIMEOUT_MS: num(5_000),
  /** In a pod: the agent container's runner socket (tools never run beside the credentials). */
  HOLT_TOOL_RUNNER_SOCKET: z.preprocess(blankAsUndefined, z.string().optional()),
  /** Where the runner sees the workspace when not where the pup does (`holt up`'s containers). */
  HOLT_TOOL_WORKSPACE: z.preprocess(blankAsUndefined, z.string().optional()),
});

export const PupEnv = PupEnvVars.transform((e) => ({
  instance: e.HOLT_INSTANCE_NAME,
  role: e.HOLT_AGENT_NAME,
  redisUrl: e.REDIS_URL,
  command: e.HOLT_AGENT_COMMAND,
  biddingStrategy: e.HOLT_BIDDING_STRATEGY,
  bidScript: e.HOLT_AGENT_BID_SCRIPT,
  modeSetting: e.HOLT_MODE,
  promptClaim: e.HOLT_PROMPT_CLAIM,
  promptExecution: e.HOLT_PROMPT_EXECUTION,
  healthPort: e.HOLT_HEALTH_PORT,
  workspace: e.HOLT_WORKSPACE,
  toolTimeoutMs: e.HOLT_TOOL_TIMEOUT_MS,
  outputLimitBytes: e.HOLT_TOOL_OUTPUT_LIMIT_BYTES,
  maxPayloadBytes: e.HOLT_MAX_PAYLOAD_BYTES,
  bidScriptTimeoutMs: e.HOLT_BID_SCRIPT_TIMEOUT_MS,
  executionLeaseMs: e.HOLT_EXECUTION_LEASE_MS,
  rescanIntervalMs: e.HOLT_RESCAN_INTERVAL_MS,
  grantQueue: e.HOLT_GRANT_QUEUE,
  bidConcurrency: e.HOLT_BID_CONCURRENCY,
  errorBackoffMs: e.HOLT_ERROR_BACKOFF_MS,
  redisRetries: e.HOLT_REDIS_RETRIES,
  storeWaitMs: e.HOLT_STORE_WAIT_MS,
  shutdownGraceMs: e.HOLT_SHUTDOWN_GRACE_MS,
  healthCheck: e.HOLT_HEALTH_CHECK_COMMAND
    ? {
        command: e.HOLT_HEALTH_CHECK_COMMAND,
        intervalMs: e.HOLT_HEALTH_CHECK_INTERVAL_MS,
        timeoutMs: e.HOLT_HEALTH_CHECK_TIMEOUT_MS,
      }
    : undefined,
  runnerSocket: e.HOLT_TOOL_RUNNER_SOCKET,
  toolWorkspace: e.HOLT_TOOL_WORKSPACE,
}));

export type PupSettings = z.output<typeof PupEnv>;
/**
 * `runner`: where tools run; `secrets`: every credential this pup holds, cut out of anything it writes
 * or sends to a model.
 */
export type PupConfig = PupSettings & {
  mode: PupMode;
  executeClaim?: string;
  runner: ToolRunner;
  secrets: string[];
};

/**
 * What a model plugin (src/llm, read by the agent's entry point) takes over from the command path:
 * executing grants, bidding, and the variable that holds its key (a secret of this pup's).
 */
export interface ModelCapabilities {
  execute: boolean;
  bid: boolean;
  apiKeyEnv?: string;
}

/** The runner of a pup's tools: the pod's agent container, or this process's children. */
export function toolRunner(
  socket: string | undefined,
  env: NodeJS.ProcessEnv,
  paths?: { workspace: string; toolWorkspace?: string },
): ToolRunner {
  const runner = socket ? new SocketToolRunner(socket) : new LocalToolRunner(env);
  return paths?.toolWorkspace && paths.toolWorkspace !== paths.workspace
    ? new WorkspaceMappedRunner(runner, paths.workspace, paths.toolWorkspace)
    : runner;
}

/**
 * docs/agent-worker.md § Modes: an explicit `--execute-claim` wins (worker), then the controller setting, else standard.
 * HOLT_MODE=worker without a claim runs the inbox-driven worker loop.
 */
export function detectMode(
  executeClaim: string | undefined,
  modeSetting: PupSettings['modeSetting'],
): PupMode | { error: string } {
  if (executeClaim !== undefined) return 'worker';
  if (modeSetting === 'controller') return 'controller';
  if (modeSetting === 'worker') return 'worker'; // inbox-driven (src/pup/inbox-worker.ts)
  return 'standard';
}

/** `--execute-claim <id>` or `--execute-claim=<id>`; anything else is an error naming the argument. */
export function parseArgs(argv: string[]): { executeClaim?: string } {
  const out: { executeClaim?: string } = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--execute-claim') {
      const v = argv[++i];
      if (!v) throw new ConfigError('--execute-claim: needs a claim id');
      out.executeClaim = v;
    } else if (a.startsWith('--execute-claim=')) {
      out.executeClaim = a.slice('--execute-claim='.length);
    } else {
      // Holt passes the agent's `command` as container args after the pup; they are ignored there too.
    }
  }
  if (out.executeClaim !== undefined && !z.uuid().safeParse(out.executeClaim).success) {
    throw new ConfigError('--execute-claim: must be a claim UUID');
  }
  return out;
}

/**
 * Reads and checks everything; throws a ConfigError whose message is one line naming the variable.
 * `model` reads the model plugin's settings, once the pup's own have passed.
 */
export function loadConfig(
  argv: string[],
  env: NodeJS.ProcessEnv,
  model?: () => ModelCapabilities | undefined,
): PupConfig {
  const r = PupEnv.safeParse(env);
  if (!r.success) throw new ConfigError(formatIssues(r.error));
  const s = r.data;
  const { executeClaim } = parseArgs(argv);
  const mode = detectMode(executeClaim, s.modeSetting);
  if (typeof mode !== 'string') throw new ConfigError(mode.error);
  const llm = model?.();
  if (mode !== 'controller' && !s.command && !llm?.execute)
    throw new ConfigError('HOLT_AGENT_COMMAND: is required unless HOLT_LLM_ENABLED is true');
  if (mode !== 'worker' && !s.biddingStrategy && !s.bidScript && !llm?.bid) {
    throw new ConfigError('HOLT_BIDDING_STRATEGY: is required unless HOLT_AGENT_BID_SCRIPT is set');
  }
  const runner = toolRunner(s.runnerSocket, env, {
    workspace: s.workspace,
    toolWorkspace: s.toolWorkspace,
  });
  return { ...s, mode, executeClaim, runner, secrets: secretsFromEnv(env, llm?.apiKeyEnv) };
}
