import type { Logger } from '../common/logger.ts';
import { Pup, type StartModelRuntime } from '../pup/pup.ts';
import type { AgentConfig } from './config.ts';

/** The model runtime an agent with a model gets, loaded only then (a command pup never pays for it). */
export function modelRuntime(cfg: AgentConfig, env: NodeJS.ProcessEnv): StartModelRuntime | undefined {
  const { llm } = cfg;
  if (!llm) return undefined;
  return async ({ bb, log, registry, countFailure }) => {
    const { startLlmRuntime } = await import('../llm/runtime.ts');
    return startLlmRuntime({ ...cfg, llm }, bb, log, env, registry, countFailure);
  };
}

/** A pup with its executors wired: the command path always, the model's when the agent has one. */
export function agentPup(cfg: AgentConfig, log?: Logger, env: NodeJS.ProcessEnv = process.env): Pup {
  return new Pup(cfg, log, modelRuntime(cfg, env));
}
