import { z } from 'zod';

// The Agent's long-term memory (spec.llm.memory): what it did, saw and concluded, kept past its turns in
// the Holt's Postgres and recalled by words and, with an embeddings model, by meaning (src/memory).

export const AgentMemory = z
  .object({
    enabled: z
      .boolean()
      .default(false)
      .describe(
        "Give the agent a long-term memory in its Holt's Postgres: the memory tools, what it recalls at the start of each turn and, with auto, its actions and reports saved.",
      ),
    scope: z
      .enum(['agent', 'holt'])
      .default('agent')
      .describe(
        "Whose memories it saves: agent, its own; holt, the Holt's, which every agent of the Holt recalls (it recalls its own and the Holt's either way).",
      ),
    topK: z
      .number()
      .int()
      .min(0)
      .max(20)
      .default(5)
      .describe('Memories recalled into the start of each turn (0: none; the memory tools still recall).'),
    ttlDays: z
      .number()
      .int()
      .min(0)
      .default(15)
      .describe('Days a memory is recalled after it is saved (0: until it is forgotten).'),
    auto: z
      .boolean()
      .default(true)
      .describe("Save each turn's actions and report by itself; false: only what the model saves."),
    embeddings: z
      .object({
        model: z.string().min(1).describe('The embeddings model.'),
        baseUrl: z
          .url()
          .optional()
          .describe(
            "OpenAI-compatible base URL of its /embeddings endpoint; defaults to the agent's model endpoint. The model's API key is sent only to the model's own endpoint: one of its own gets none.",
          ),
      })
      .optional()
      .describe('Vectors, so a memory is recalled by meaning as well as by its words; without: words only.'),
  })
  .describe("The agent's long-term memory, kept past its turns (docs/agents.md, Memory).");
export type AgentMemory = z.output<typeof AgentMemory>;

// The agent's view of itself (spec.llm.selfAudit): its success rate, failures in a row and loops, read at
// each turn's start; a forced pivot when stuck or looping, and a strategic review when asked for.
export const AgentSelfAudit = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe(
        'Audit the agent at the start of each turn; stuck or looping, it is told to change its approach.',
      ),
    reviewEveryTurns: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe(
        'A strategic review (one model call) every this many turns, and whenever stuck or looping; 0: none.',
      ),
    reviewPrompt: z
      .string()
      .min(1)
      .max(20_000)
      .optional()
      .describe(
        "The strategic review's prompt; the default asks what works, what does not and what to change.",
      ),
  })
  .describe("The agent's self-audit and strategic reviews (docs/agents.md, Hand-offs and self-audit).");
export type AgentSelfAudit = z.output<typeof AgentSelfAudit>;
