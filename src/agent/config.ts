import { apiKeyFrom, type LlmSettings, loadLlmSettings } from '../llm/config.ts';
import { loadConfig, type PupConfig } from '../pup/config.ts';

/**
 * An agent's whole configuration: the pup's, and the model's when the agent's spec names one (src/llm:
 * HOLT_LLM_*, HOLT_BUDGET_*). `apiKey` is the model's key, read from this pup's environment or
 * credential descriptor (never process.env).
 */
export type AgentConfig = PupConfig & { llm?: LlmSettings; apiKey?: string };

/** Reads and checks everything; throws a ConfigError naming the variable (the pup's first, then the model's). */
export function loadAgentConfig(argv: string[], env: NodeJS.ProcessEnv): AgentConfig {
  let llm: LlmSettings | undefined;
  const cfg = loadConfig(argv, env, () => {
    llm = loadLlmSettings(env);
    return llm;
  });
  return { ...cfg, llm, apiKey: llm ? apiKeyFrom(env, llm) : undefined };
}
