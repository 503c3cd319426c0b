import { z } from 'zod';

/**
 * Status of the holt.io kinds, written only by the operator (through /status). Same zod-once rule as
 * the specs: the CRDs are generated from these. Conditions follow metav1.Condition exactly.
 */

const time = z.iso.datetime().describe('RFC 3339 time.');
const count = (what: string) => z.number().int().min(0).describe(what);
const observedGeneration = count('The metadata.generation the operator last acted on.');

export const Condition = z
  .object({
    type: z
      .string()
      .max(316)
      .regex(
        /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
      )
      .describe('Condition type in CamelCase: Ready, Progressing, Degraded or a component condition.'),
    status: z.enum(['True', 'False', 'Unknown']).describe('True, False or Unknown.'),
    observedGeneration: observedGeneration
      .optional()
      .describe('The metadata.generation this condition was computed from.'),
    lastTransitionTime: time.describe('When the status last changed.'),
    reason: z
      .string()
      .min(1)
      .max(1024)
      .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
      .describe('Why, in one CamelCase word (e.g. StoresNotReady).'),
    message: z.string().max(32768).describe('Human-readable details; may be empty.'),
  })
  .describe('One aspect of the current state (metav1.Condition).');
export type Condition = z.infer<typeof Condition>;

export const conditions = z
  .array(Condition)
  .max(32)
  .optional()
  .describe('Latest observations: Ready is the summary; Progressing and Degraded beside it.');

export const HoltPhase = z
  .enum(['Pending', 'Progressing', 'Ready', 'Degraded'])
  .describe('One-word summary of the conditions, for humans (kubectl get); automation reads conditions.');

export const HoltStatus = z
  .object({
    observedGeneration: observedGeneration.optional(),
    phase: HoltPhase.optional(),
    conditions,
    endpoints: z
      .object({
        redis: z.string().optional().describe('host:port of the Redis the Holt uses (no credentials).'),
        nats: z.string().optional().describe('host:port of the NATS server the Holt uses.'),
        postgres: z.string().optional().describe('host:port of the Postgres the Holt uses.'),
        orchestrator: z.string().optional().describe('host:port of the orchestrator health/metrics Service.'),
      })
      .optional()
      .describe('Where the Holt components can be reached inside the cluster.'),
    agents: z
      .object({
        total: count('Agent resources that reference this Holt.'),
        ready: count('Of those, how many are Ready.'),
      })
      .optional()
      .describe('Agent counts.'),
    data: z
      .object({
        quarantined: count(
          'Stored items the orchestrator set aside, never acted on (malformed, or by a role not granted): `holt status` lists them.',
        ),
        retention: z
          .object({
            days: z
              .number()
              .min(0)
              .describe(
                'Finished workflows older than this leave the stores (spec.orchestrator.retentionDays).',
              ),
            lastPassTime: time.optional().describe("When the leader's last retention pass ran."),
            removedWorkflows: count('Finished workflows removed from Redis, in all.'),
            removedArtefacts: count('Artefacts removed with them, in all.'),
            removedTurns: count('Finished agent turns removed from Postgres, in all.'),
            lastError: z
              .string()
              .max(500)
              .optional()
              .describe('Why the last pass failed (the next one retries).'),
          })
          .optional()
          .describe("What retention does, from the leader's report; absent before its first pass."),
      })
      .optional()
      .describe("What the Holt's stores hold that needs attention, and what retention removed (polled)."),
  })
  .describe('Observed state of the Holt, written by the operator.');
export type HoltStatus = z.infer<typeof HoltStatus>;

export const AgentStatus = z
  .object({
    observedGeneration: observedGeneration.optional(),
    conditions,
    role: z.string().optional().describe('The resolved role (spec.role, else metadata.name).'),
    mode: z
      .enum(['standard', 'scalable', 'freshPerCall'])
      .optional()
      .describe(
        'How the agent runs: one standard pup, a controller with a WorkerPool, or one Job per claim.',
      ),
    workerPool: z.string().optional().describe('Name of the WorkerPool executing its claims (scalable).'),
    replicas: count('Pods of the agent (controller or standard pup).').optional(),
    readyReplicas: count('Ready pods of the agent.').optional(),
    claimsInFlight: count(
      "Active claims that grant the role in their current phase (review, parallel, exclusive, or a feedback claim's rework) and lack the role's output: queued, running, or waiting for the Answer to a Question. The same for every mode (for scalable agents it includes grants still queued for workers). Counted by the Holt's orchestrator (every HOLT_LOAD_INTERVAL_MS) and re-read by the operator periodically; kept at its last value while the Holt's Redis is unreachable.",
    ).optional(),
    budget: z
      .object({
        windowStart: time
          .optional()
          .describe(
            'Start of the sliding budget window as of the last model call (that call minus the window).',
          ),
        calls: count('Model calls in the current window.').optional(),
        tokens: count('Tokens used in the current window.').optional(),
        costUsd: z.number().min(0).optional().describe('Total cost so far in USD.'),
        paused: z.boolean().optional().describe('True while a budget or error limit pauses the agent.'),
        pausedReason: z
          .string()
          .optional()
          .describe(
            'Why the agent is paused (a refused key, a wrong model, a spent budget...), while it is.',
          ),
        pausedClass: z
          .string()
          .optional()
          .describe('The class of the error that paused it: config, auth, quota, transient or model_output.'),
      })
      .optional()
      .describe(
        "Model use against spec.budgets (LLM agents), from the pup's agent_status hash in the Holt's Redis; absent for command agents.",
      ),
    life: z
      .object({
        state: z.string().describe('running, or stopped (its ingress refuses, and it starts no turn).'),
        items: z
          .object({
            runnable: count('Open work items it can work on now.'),
            waiting: count('Open work items waiting on a timer, a message, an operator or a task.'),
            blocked: count('Open work items blocked by other items.'),
            completed: count('Work items completed or cancelled.'),
          })
          .describe('Its work items by readiness.'),
        lastMessageTime: time.optional().describe('When the last message or wake hint came in.'),
      })
      .optional()
      .describe("A living agent's (spec.llm.life or spec.ingress): from its pup's agent_status hash."),
    memory: z
      .object({
        memories: count(
          'Its live memories: those it wrote, its own and those it saved for the Holt (expired ones left out).',
        ),
        recalls: count('How often those were recalled in all (Holt-wide ones by any agent).'),
      })
      .optional()
      .describe(
        "An agent's long-term memory (spec.llm.memory): from its pup's agent_status hash, as of the pup's start and its last save or recall; absent without a memory.",
      ),
    ingress: z
      .object({
        tokens: z
          .array(
            z.object({
              name: z.string().describe('The token name.'),
              secretName: z.string().describe('The Secret that holds it.'),
              present: z.boolean().describe('The Secret holds a token (key token).'),
            }),
          )
          .describe('One entry per token of spec.ingress.tokens.'),
      })
      .optional()
      .describe('The capability tokens spec.ingress declares, and whether each is present.'),
    toolServers: z
      .array(
        z.object({
          name: z.string().describe('The ToolServer.'),
          url: z.string().optional().describe("The address the agent's pups use."),
          ready: z.boolean().describe('Whether the operator could list its tools.'),
          message: z.string().describe('Why not, or what it found.'),
          tools: z.array(z.string()).optional().describe('Its tools at its last listing.'),
        }),
      )
      .optional()
      .describe('Each ToolServer of spec.llm.toolServers: its address and tools, or why it is left out.'),
    mcpServers: z
      .array(
        z.object({
          name: z.string().describe('The MCP server (spec.llm.mcpServers).'),
          ready: z.boolean().describe("Whether the agent's pup has a session with it and offers its tools."),
          message: z
            .string()
            .describe(
              'connected and its tool count, or its state (connecting, unreachable, refused) and why.',
            ),
          tools: z
            .array(z.string())
            .optional()
            .describe('The tools it offers, its allowlist (tools) applied.'),
          lastChangeTime: time.optional().describe('When its state last changed, as the pup saw it.'),
        }),
      )
      .optional()
      .describe(
        "Each inline MCP server as the agent's pup sees it (from the Holt's Redis, published on change); absent before the pup reports.",
      ),
  })
  .describe('Observed state of the Agent, written by the operator.');
export type AgentStatus = z.infer<typeof AgentStatus>;

export const WorkerPoolStatus = z
  .object({
    observedGeneration: observedGeneration.optional(),
    conditions,
    replicas: count('Current worker pods (the scale subresource status).').optional(),
    readyReplicas: count('Ready worker pods.').optional(),
    selector: z
      .string()
      .optional()
      .describe('Label selector of the worker pods, as a string (the scale subresource; HPA needs it).'),
    desiredReplicas: count('What the autoscaler last decided.').optional(),
    backlog: count('Pending inbox rows of the target at the last read.').optional(),
    lastActiveTime: time
      .optional()
      .describe(
        'Last time the backlog exceeded the activation threshold (kept so a new leader keeps the cooldown).',
      ),
    lastScaleTime: time.optional().describe('Last time spec.replicas was changed by the autoscaler.'),
    backlogReadFailures: count(
      'Consecutive failed backlog reads (fallback applies after autoscaling.fallbackAfterFailures).',
    ).optional(),
  })
  .describe('Observed state of the WorkerPool, written by the operator.');
export type WorkerPoolStatus = z.infer<typeof WorkerPoolStatus>;

export const ToolServerStatus = z
  .object({
    observedGeneration: observedGeneration.optional(),
    conditions,
    url: z
      .string()
      .optional()
      .describe('Where Agents reach it: the Service in the cluster, or the external url.'),
    tools: z
      .array(
        z.object({
          name: z.string().describe('Tool name as the server lists it.'),
          description: z.string().optional().describe('Its description (first 200 characters).'),
        }),
      )
      .optional()
      .describe('The tools the operator discovered at its last successful connection.'),
    lastDiscoveryTime: time.optional().describe('When the tools were last read.'),
  })
  .describe('Observed state of the ToolServer, written by the operator.');
export type ToolServerStatus = z.infer<typeof ToolServerStatus>;
