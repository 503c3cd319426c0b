import { z } from 'zod';
import {
  AgentTool,
  McpServer,
  mcpServerProblems,
  ResultField,
  unendingTools,
  WorkflowStep,
  workflowProblems,
} from '../api/agent.ts';
import { ConfigError, formatIssues } from '../common/config.ts';

const blank = (v: unknown) => (v === '' ? undefined : v);
const int = (def: number, min = 0) =>
  z.preprocess((v) => (v === '' || v === undefined ? def : v), z.coerce.number().int().min(min));
const optInt = z.preprocess(blank, z.coerce.number().int().positive().optional());
const optNum = z.preprocess(blank, z.coerce.number().nonnegative().optional());
const bool = z
  .preprocess(blank, z.enum(['true', 'false', '1', '0']).optional())
  .transform((v) => v === 'true' || v === '1');
const json = <S extends z.ZodType>(schema: S, what: string) =>
  z.preprocess(
    blank,
    z
      .string()
      .transform((s, ctx) => {
        try {
          return JSON.parse(s) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: `must be JSON (${what})` });
          return z.NEVER;
        }
      })
      .pipe(schema)
      .optional(),
  );

/**
 * The LLM settings of a pup, from the environment that `pupEnvironment` writes (HOLT_LLM_*,
 * HOLT_BUDGET_*). Present only for agents whose spec names an LLM (HOLT_LLM_ENABLED or HOLT_LLM_BID).
 * The API key is read from HOLT_LLM_API_KEY, or from the variable HOLT_LLM_API_KEY_ENV names; it is
 * kept out of this object's enumerable fields so a logged config can never carry it.
 */
export const LlmEnv = z
  .object({
    HOLT_LLM_ENABLED: bool,
    HOLT_LLM_MODEL: z.preprocess(blank, z.string().optional()),
    HOLT_LLM_BASE_URL: z.preprocess(blank, z.url({ error: 'must be a URL' }).optional()),
    HOLT_LLM_TEMPERATURE: z.preprocess(blank, z.coerce.number().min(0).max(2).optional()),
    HOLT_LLM_MAX_TOKENS: optInt,
    HOLT_LLM_TIMEOUT_MS: int(120_000, 1),
    HOLT_LLM_MAX_RETRIES: int(3, 0),
    HOLT_LLM_MAX_STEPS: int(8, 1),
    HOLT_LLM_MUST_END_WITH: z.preprocess(blank, z.string().optional()),
    HOLT_LLM_RESULT_FIELDS: json(
      z.record(z.string(), ResultField),
      'field name → {type, required, description}',
    ),
    HOLT_LLM_MAX_TOOL_CALLS: int(8, 1),
    HOLT_LLM_MAX_OUTPUT_ERRORS: int(3, 1),
    HOLT_LLM_PLANNING: bool,
    HOLT_LLM_WORKING_MEMORY_BYTES: int(0, 0),
    HOLT_LLM_MEMORY: bool,
    HOLT_LLM_MEMORY_SCOPE: z.preprocess(blank, z.enum(['agent', 'holt']).default('agent')),
    HOLT_LLM_MEMORY_TOP_K: int(5, 0),
    HOLT_LLM_MEMORY_TTL_DAYS: int(15, 0),
    HOLT_LLM_MEMORY_AUTO: z
      .preprocess(blank, z.enum(['true', 'false']).default('true'))
      .transform((v) => v === 'true'),
    HOLT_LLM_EMBEDDINGS_BASE_URL: z.preprocess(blank, z.url({ error: 'must be a URL' }).optional()),
    HOLT_LLM_EMBEDDINGS_MODEL: z.preprocess(blank, z.string().optional()),
    HOLT_LLM_SELF_AUDIT: z
      .preprocess(blank, z.enum(['true', 'false']).default('true'))
      .transform((v) => v === 'true'),
    HOLT_LLM_REVIEW_EVERY: int(0, 0),
    HOLT_LLM_REVIEW_PROMPT: z.preprocess(blank, z.string().max(20_000).optional()),
    HOLT_LLM_TOOLS: json(z.array(AgentTool), 'a list of tools'),
    HOLT_LLM_MCP_SERVERS: json(z.array(McpServer), 'a list of MCP servers'),
    HOLT_LLM_APPROVAL_TIMEOUT_MS: int(3_600_000, 1000),
    HOLT_LLM_ALLOWED_TOOLS: json(z.array(z.string()), 'a list of tool names'),
    HOLT_LLM_FILE_TOOLS: bool,
    HOLT_LLM_FILE_TOOLS_ALLOW_GIT: bool,
    HOLT_LLM_WORK_ITEMS: bool,
    HOLT_LLM_LIFE: bool,
    HOLT_LIFE_POLL_MS: int(5_000, 50),
    HOLT_LIFE_TURN_BYTES: int(65_536, 1024),
    HOLT_LIFE_MAX_OPEN_ITEMS: int(200, 1),
    HOLT_LLM_WORKFLOW: json(z.array(WorkflowStep).min(1), 'a list of workflow steps'),
    HOLT_LLM_HISTORY_KEEP: int(0, 0),
    HOLT_LLM_TURN_TIMEOUT_MS: optInt,
    HOLT_LLM_GOAL_TIMEOUT_MS: optInt,
    HOLT_LLM_STATE_PROBE: z.preprocess(blank, z.enum(['true', 'false', '1', '0']).optional()),
    HOLT_LLM_BID: bool,
    HOLT_LLM_STREAM: z
      .preprocess(blank, z.enum(['true', 'false']).default('true'))
      .transform((v) => v === 'true'),
    HOLT_LLM_RESULT_TYPE: z.preprocess(blank, z.string().default('LlmResult')),
    HOLT_LLM_TOOL_RESULT_CHARS: int(8000, 100),
    HOLT_LLM_TURN_LEASE_MS: int(30_000, 500),
    HOLT_LLM_PRICE_INPUT_PER_MTOK: optNum,
    HOLT_LLM_PRICE_OUTPUT_PER_MTOK: optNum,
    HOLT_LLM_API_KEY_ENV: z.preprocess(blank, z.string().optional()),
    HOLT_BUDGET_WINDOW_MS: int(3_600_000, 1),
    HOLT_BUDGET_CALLS: optInt,
    HOLT_BUDGET_TOKENS: optInt,
    HOLT_BUDGET_COST_USD: optNum,
    HOLT_BUDGET_MAX_CONSECUTIVE_ERRORS: int(5, 1),
    HOLT_BUDGET_ERROR_BASE_MS: int(1000, 0),
    HOLT_BUDGET_ERROR_PAUSE_MS: int(300_000, 0),
    DATABASE_URL: z.preprocess(blank, z.string().optional()),
    NATS_URL: z.preprocess(blank, z.string().optional()),
  })
  .transform((e) => ({
    /** The turn is driven by the model (else only the bid is). */
    execute: e.HOLT_LLM_ENABLED,
    model: e.HOLT_LLM_MODEL ?? 'gpt-4o-mini',
    baseUrl: e.HOLT_LLM_BASE_URL,
    temperature: e.HOLT_LLM_TEMPERATURE,
    maxTokens: e.HOLT_LLM_MAX_TOKENS,
    timeoutMs: e.HOLT_LLM_TIMEOUT_MS,
    maxRetries: e.HOLT_LLM_MAX_RETRIES,
    maxSteps: e.HOLT_LLM_MAX_STEPS,
    mustEndWith: e.HOLT_LLM_MUST_END_WITH,
    /** Fields every result must carry (contract.ts). */
    resultFields: e.HOLT_LLM_RESULT_FIELDS,
    maxToolCallsPerReply: e.HOLT_LLM_MAX_TOOL_CALLS,
    /** Unusable model outputs in a row shown to the model before the turn fails (class model_output). */
    maxOutputErrors: e.HOLT_LLM_MAX_OUTPUT_ERRORS,
    planning: e.HOLT_LLM_PLANNING,
    workingMemoryBytes: e.HOLT_LLM_WORKING_MEMORY_BYTES,
    /**
     * Long-term memory (src/memory): the memory tools, recall into each turn's opening, and the turn's
     * actions and reports saved when `auto`. Vectors only with an embeddings model; else full-text.
     */
    /** The self-audit at each turn's opening (turn/audit.ts): a forced pivot when stuck or looping. */
    selfAudit: e.HOLT_LLM_SELF_AUDIT,
    /** A strategic review every this many turns, and when stuck or looping; 0: never. */
    reviewEvery: e.HOLT_LLM_REVIEW_EVERY,
    reviewPrompt: e.HOLT_LLM_REVIEW_PROMPT,
    longMemory: e.HOLT_LLM_MEMORY
      ? {
          scope: e.HOLT_LLM_MEMORY_SCOPE,
          topK: e.HOLT_LLM_MEMORY_TOP_K,
          /** 0: kept until forgotten. */
          ttlDays: e.HOLT_LLM_MEMORY_TTL_DAYS,
          auto: e.HOLT_LLM_MEMORY_AUTO,
          embeddings: e.HOLT_LLM_EMBEDDINGS_MODEL
            ? {
                model: e.HOLT_LLM_EMBEDDINGS_MODEL,
                baseUrl: e.HOLT_LLM_EMBEDDINGS_BASE_URL ?? e.HOLT_LLM_BASE_URL,
              }
            : undefined,
        }
      : undefined,
    tools: e.HOLT_LLM_TOOLS ?? [],
    /** MCP servers whose tools the model may call (src/llm/mcp). */
    mcpServers: e.HOLT_LLM_MCP_SERVERS ?? [],
    /** How long a call that needs a person's approval waits for it (turn/approval.ts). */
    approvalTimeoutMs: e.HOLT_LLM_APPROVAL_TIMEOUT_MS,
    allowedTools: e.HOLT_LLM_ALLOWED_TOOLS,
    /** The built-in workspace file tools (workspace-tools.ts). */
    fileTools: e.HOLT_LLM_FILE_TOOLS,
    /** The file tools may write in .git (hooks, config); refused by default (src/pup/runner/files.ts). */
    fileToolsAllowGit: e.HOLT_LLM_FILE_TOOLS_ALLOW_GIT,
    /** The work item tools (work-tools.ts, src/work). */
    workItems: e.HOLT_LLM_WORK_ITEMS || e.HOLT_LLM_LIFE,
    /** The agent lives (src/life): its own turns on messages, timers, waits and runnable items. */
    life: e.HOLT_LLM_LIFE,
    /** The life loop's safety-net pass (a doorbell is lossy). */
    lifePollMs: e.HOLT_LIFE_POLL_MS,
    /** The most message bytes one life turn is fed; the rest stays queued for the next turn. */
    lifeTurnBytes: e.HOLT_LIFE_TURN_BYTES,
    /** The most open work items an agent may have; work_create says so when full. */
    maxOpenItems: e.HOLT_LIFE_MAX_OPEN_ITEMS,
    /** The agent runs these steps instead of the ReAct loop (workflow.ts). */
    workflow: e.HOLT_LLM_WORKFLOW,
    /** Exchanges kept word for word when compacting (compaction.ts); 0 = no compaction. */
    historyKeep: e.HOLT_LLM_HISTORY_KEEP,
    /** Wall-clock time boxes of a turn and of a goal (policy.ts timeBoxExceeded); none when unset. */
    turnTimeoutMs: e.HOLT_LLM_TURN_TIMEOUT_MS,
    goalTimeoutMs: e.HOLT_LLM_GOAL_TIMEOUT_MS,
    /** The workspace state before each model call; on with the file tools unless set. */
    stateProbe:
      e.HOLT_LLM_STATE_PROBE === undefined
        ? e.HOLT_LLM_FILE_TOOLS
        : e.HOLT_LLM_STATE_PROBE === 'true' || e.HOLT_LLM_STATE_PROBE === '1',
    bid: e.HOLT_LLM_BID,
    stream: e.HOLT_LLM_STREAM,
    resultType: e.HOLT_LLM_RESULT_TYPE,
    toolResultChars: e.HOLT_LLM_TOOL_RESULT_CHARS,
    turnLeaseMs: e.HOLT_LLM_TURN_LEASE_MS,
    prices: {
      inputPerMTok: e.HOLT_LLM_PRICE_INPUT_PER_MTOK ?? 0,
      outputPerMTok: e.HOLT_LLM_PRICE_OUTPUT_PER_MTOK ?? 0,
    },
    apiKeyEnv: e.HOLT_LLM_API_KEY_ENV,
    budget: {
      windowMs: e.HOLT_BUDGET_WINDOW_MS,
      calls: e.HOLT_BUDGET_CALLS,
      tokens: e.HOLT_BUDGET_TOKENS,
      costUsd: e.HOLT_BUDGET_COST_USD,
      maxConsecutiveErrors: e.HOLT_BUDGET_MAX_CONSECUTIVE_ERRORS,
      errorBaseMs: e.HOLT_BUDGET_ERROR_BASE_MS,
      errorPauseMs: e.HOLT_BUDGET_ERROR_PAUSE_MS,
    },
    databaseUrl: e.DATABASE_URL,
    natsUrl: e.NATS_URL,
  }));

export type LlmSettings = z.output<typeof LlmEnv>;
export type BudgetSettings = LlmSettings['budget'];

/** Whether the environment describes an LLM agent at all. */
export function isLlmAgent(env: NodeJS.ProcessEnv): boolean {
  return env.HOLT_LLM_ENABLED === 'true' || env.HOLT_LLM_BID === 'true';
}

/** LLM settings, or undefined for a command-only agent; throws a one-line ConfigError naming the variable. */
export function loadLlmSettings(env: NodeJS.ProcessEnv): LlmSettings | undefined {
  if (!isLlmAgent(env)) return undefined;
  const r = LlmEnv.safeParse(env);
  if (!r.success) throw new ConfigError(formatIssues(r.error));
  const [problem] = workflowProblems(r.data.workflow ?? [], r.data.tools);
  if (problem) throw new ConfigError(`HOLT_LLM_WORKFLOW: ${problem}`);
  const [mcpProblem] = mcpServerProblems(r.data.mcpServers);
  if (mcpProblem) throw new ConfigError(`HOLT_LLM_MCP_SERVERS: ${mcpProblem}`);
  const unending = unendingTools(r.data.mustEndWith, r.data.tools);
  if (unending.length)
    throw new ConfigError(
      `HOLT_LLM_MUST_END_WITH: ${unending.join(', ')} cannot end a turn: name submit_result or a tool with terminate: true`,
    );
  if (!r.data.databaseUrl && r.data.execute)
    throw new ConfigError(
      'DATABASE_URL: is required for LLM agents (turns and steps are stored in Postgres)',
    );
  return r.data;
}

/** The API key: never part of the settings object, read when the client is made. */
export function apiKeyFrom(env: NodeJS.ProcessEnv, s: Pick<LlmSettings, 'apiKeyEnv'>): string | undefined {
  const named = s.apiKeyEnv ? env[s.apiKeyEnv] : undefined;
  return named || env.HOLT_LLM_API_KEY || env.OPENAI_API_KEY || undefined;
}
