import type { PupMode } from '../blackboard/pup-mode.ts';
import type { AgentSpec } from './agent.ts';

export interface PupContext {
  instance: string;
  role: string;
  workspace: string;
  healthPort: number;
  mode?: PupMode;
  /** The Holt-wide LLM defaults (endpoint, model, the name of the API key's variable). */
  llm?: { baseUrl?: string; model?: string; apiKeyEnv?: string };
}

/**
 * LLM settings as HOLT_LLM_* / HOLT_BUDGET_* (read by src/llm/config.ts). The API key itself is never
 * written here: locally HOLT_LLM_API_KEY_ENV names the variable holding it; in Kubernetes the
 * operator sets HOLT_LLM_API_KEY from the Secret (valueFrom), so no value ever sits in a spec or a log.
 */
export function llmEnvironment(agent: AgentSpec, holt: PupContext['llm']): Record<string, string> {
  const env: Record<string, string> = {};
  const l = agent.llm;
  if (!l && !agent.bidding.llm) return env;
  const set = (k: string, v: string | number | boolean | undefined) => {
    if (v !== undefined) env[k] = String(v);
  };
  if (l) env.HOLT_LLM_ENABLED = 'true';
  if (agent.bidding.llm) env.HOLT_LLM_BID = 'true';
  set('HOLT_LLM_MODEL', l?.model ?? holt?.model);
  set('HOLT_LLM_BASE_URL', l?.baseUrl ?? holt?.baseUrl);
  set('HOLT_LLM_API_KEY_ENV', holt?.apiKeyEnv);
  if (l) {
    set('HOLT_LLM_TEMPERATURE', l.temperature);
    set('HOLT_LLM_MAX_TOKENS', l.maxTokens);
    set('HOLT_LLM_TIMEOUT_MS', l.timeoutSeconds * 1000);
    set('HOLT_LLM_MAX_STEPS', l.maxSteps);
    set('HOLT_LLM_MUST_END_WITH', l.mustEndWith);
    if (l.resultFields) env.HOLT_LLM_RESULT_FIELDS = JSON.stringify(l.resultFields);
    set('HOLT_LLM_MAX_TOOL_CALLS', l.maxToolCallsPerReply);
    set('HOLT_LLM_MAX_OUTPUT_ERRORS', l.maxOutputErrors);
    set('HOLT_LLM_PLANNING', l.planning);
    set('HOLT_LLM_WORKING_MEMORY_BYTES', l.workingMemoryBytes);
    const m = l.memory;
    if (m?.enabled) {
      env.HOLT_LLM_MEMORY = 'true';
      set('HOLT_LLM_MEMORY_SCOPE', m.scope);
      set('HOLT_LLM_MEMORY_TOP_K', m.topK);
      set('HOLT_LLM_MEMORY_TTL_DAYS', m.ttlDays);
      set('HOLT_LLM_MEMORY_AUTO', m.auto);
      set('HOLT_LLM_EMBEDDINGS_MODEL', m.embeddings?.model);
      set('HOLT_LLM_EMBEDDINGS_BASE_URL', m.embeddings?.baseUrl);
    }
    const a = l.selfAudit;
    if (a) {
      set('HOLT_LLM_SELF_AUDIT', a.enabled);
      if (a.reviewEveryTurns) set('HOLT_LLM_REVIEW_EVERY', a.reviewEveryTurns);
      set('HOLT_LLM_REVIEW_PROMPT', a.reviewPrompt);
    }
    if (l.tools.length) env.HOLT_LLM_TOOLS = JSON.stringify(l.tools);
    if (l.mcpServers.length) env.HOLT_LLM_MCP_SERVERS = JSON.stringify(l.mcpServers);
    set('HOLT_LLM_APPROVAL_TIMEOUT_MS', l.approvalTimeoutSeconds * 1000);
    if (l.allowedTools) env.HOLT_LLM_ALLOWED_TOOLS = JSON.stringify(l.allowedTools);
    if (l.fileTools) env.HOLT_LLM_FILE_TOOLS = 'true';
    if (l.fileToolsAllowGit) env.HOLT_LLM_FILE_TOOLS_ALLOW_GIT = 'true';
    if (l.workItems) env.HOLT_LLM_WORK_ITEMS = 'true';
    // An agent with ingress lives: its messages need the life loop to be read.
    if (l.life || agent.ingress?.enabled) env.HOLT_LLM_LIFE = 'true';
    if (l.workflow) env.HOLT_LLM_WORKFLOW = JSON.stringify(l.workflow);
    if (l.historyKeep) env.HOLT_LLM_HISTORY_KEEP = String(l.historyKeep);
    if (l.turnTimeoutSeconds) env.HOLT_LLM_TURN_TIMEOUT_MS = String(l.turnTimeoutSeconds * 1000);
    if (l.goalTimeoutSeconds) env.HOLT_LLM_GOAL_TIMEOUT_MS = String(l.goalTimeoutSeconds * 1000);
    set('HOLT_LLM_STATE_PROBE', l.stateProbe);
  }
  const b = agent.budgets;
  if (b) {
    set('HOLT_BUDGET_WINDOW_MS', b.windowSeconds * 1000);
    set('HOLT_BUDGET_CALLS', b.callsPerWindow);
    set('HOLT_BUDGET_TOKENS', b.tokensPerWindow);
    set('HOLT_BUDGET_COST_USD', b.maxCostUsd);
    set('HOLT_BUDGET_MAX_CONSECUTIVE_ERRORS', b.maxConsecutiveErrors);
  }
  return env;
}

/**
 * The pup's environment for one agent, as Holt names it (HOLT_*), without connection URLs (the caller
 * adds REDIS_URL etc.: literal locally, from Secrets in Kubernetes). Pure, shared by holt up and the operator.
 */
export function pupEnvironment(agent: AgentSpec, ctx: PupContext): Record<string, string> {
  const env: Record<string, string> = {
    HOLT_INSTANCE_NAME: ctx.instance,
    HOLT_AGENT_NAME: ctx.role,
    HOLT_WORKSPACE: ctx.workspace,
    HOLT_HEALTH_PORT: String(ctx.healthPort),
  };
  const command = ctx.mode === 'worker' ? (agent.worker?.command ?? agent.command) : agent.command;
  if (command) env.HOLT_AGENT_COMMAND = JSON.stringify(command);
  if (agent.bidding.strategy) env.HOLT_BIDDING_STRATEGY = agent.bidding.strategy;
  if (agent.bidding.script) env.HOLT_AGENT_BID_SCRIPT = JSON.stringify(agent.bidding.script);
  if (ctx.mode && ctx.mode !== 'standard') env.HOLT_MODE = ctx.mode;
  if (agent.prompts.claim) env.HOLT_PROMPT_CLAIM = agent.prompts.claim;
  if (agent.prompts.execution) env.HOLT_PROMPT_EXECUTION = agent.prompts.execution;
  if (agent.healthCheck) {
    env.HOLT_HEALTH_CHECK_COMMAND = JSON.stringify(agent.healthCheck.command);
    env.HOLT_HEALTH_CHECK_INTERVAL_MS = String(agent.healthCheck.intervalSeconds * 1000);
    env.HOLT_HEALTH_CHECK_TIMEOUT_MS = String(agent.healthCheck.timeoutSeconds * 1000);
  }
  Object.assign(env, llmEnvironment(agent, ctx.llm));
  // The names the agent declares reach its tools; nothing else of the pup's environment does.
  // A remote MCP server's header values (its tokens) are the pup's alone: never a tool's.
  const headerVars = new Set(mcpHeaderVars(agent));
  const toolVars = agent.env.map((e) => e.name).filter((n) => !headerVars.has(n));
  if (toolVars.length) env.HOLT_TOOL_ENV = JSON.stringify(toolVars);
  // Literal user environment last-but-not-over ours: HOLT_* set above win.
  for (const e of agent.env) if (e.value !== undefined && !(e.name in env)) env[e.name] = e.value;
  return env;
}

/** The variables a remote MCP server's headers and a remote A2A agent's token are read from: the pup's alone. */
export function mcpHeaderVars(agent: Pick<AgentSpec, 'llm'>): string[] {
  return [
    ...new Set([
      ...(agent.llm?.mcpServers ?? []).flatMap((m) => Object.values(m.headers ?? {}).map((h) => h.env)),
      // A remote A2A agent's token (an async: a2a tool's a2a.token) is the pup's alone too.
      ...(agent.llm?.tools ?? []).flatMap((t) => (t.a2a?.token ? [t.a2a.token.env] : [])),
    ]),
  ];
}

/**
 * `holt up`: the header variables leave the pup's literal environment (a local tool can read its pup's
 * /proc/<pid>/environ) for its credentials descriptor, with their values from the Holt file or, when it
 * does not set them, from the shell `holt up` runs in.
 */
export function mcpHeaderSecrets(
  agent: Pick<AgentSpec, 'llm'>,
  literal: Record<string, string>,
  shell: NodeJS.ProcessEnv,
): { env: Record<string, string>; secrets: Record<string, string> } {
  const env = { ...literal };
  const secrets: Record<string, string> = {};
  for (const k of mcpHeaderVars(agent)) {
    const v = env[k] || shell[k];
    delete env[k];
    if (v) secrets[k] = v;
  }
  return { env, secrets };
}
