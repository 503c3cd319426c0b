import type { AgentSpec } from './agent.ts';

export interface PupContext {
  instance: string;
  role: string;
  workspace: string;
  healthPort: number;
  mode?: 'standard' | 'controller' | 'worker';
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
  // Literal user environment last-but-not-over ours: HOLT_* set above win.
  for (const e of agent.env) if (e.value !== undefined && !(e.name in env)) env[e.name] = e.value;
  return env;
}
