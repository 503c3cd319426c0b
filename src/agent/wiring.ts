import type { Logger } from '../common/logger.ts';
import { Pup, type StartModelPlugin } from '../pup/pup.ts';
import type { AgentConfig } from './config.ts';

/** The model plugin an agent with a model gets, loaded only then (a command pup never pays for it). */
export function modelPlugin(cfg: AgentConfig, env: NodeJS.ProcessEnv): StartModelPlugin | undefined {
  const { llm } = cfg;
  if (!llm) return undefined;
  return async ({ bb, log, registry, countFailure }) => {
    const { startLlmPlugin } = await import('../llm/plugin.ts');
    return startLlmPlugin({ ...cfg, llm }, bb, log, env, registry, countFailure);
  };
}

/** A pup with its executors wired: the command path always, the model's when the agent has one. */
export function agentPup(cfg: AgentConfig, log?: Logger, env: NodeJS.ProcessEnv = process.env): Pup {
  return new Pup(cfg, log, modelPlugin(cfg, env));
}
