import { z } from 'zod';
import { LLM_KEY_VARS, STORE_URL_VARS } from '../common/secrets.ts';
import { AgentMemory, AgentSelfAudit } from './agent-memory.ts';
import { argv } from './common.ts';

// The Agent's model settings (spec.llm, spec.budgets): tools, workflow steps, result fields and their checks.

/** A run's time limit in seconds (a tool's, a workflow's code step's). */
const killAfter = z.number().int().positive().max(3600).default(60);

/** A variable name: what a header's value or a stdio server's environment is taken from. */
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name');

export const AgentTool = z
  .object({
    name: z
      .string()
      .regex(/^[a-zA-Z0-9_-]{1,64}$/, 'tool name must be 1-64 of [a-zA-Z0-9_-]')
      .describe('Tool name shown to the model.'),
    description: z.string().default('').describe('What the tool does, shown to the model.'),
    parameters: z
      .record(z.string(), z.unknown())
      .default({ type: 'object', properties: {} })
      .describe('JSON Schema of the arguments the model may pass.'),
    argv: argv
      .optional()
      .describe(
        'Command template; {{name}} is replaced by the argument of that name. Run without a shell, in the workspace. Required unless async is nats.',
      ),
    timeoutSeconds: killAfter.describe('Kill the tool after this many seconds.'),
    defaults: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('Values for arguments the model leaves out.'),
    fixed: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('Arguments always injected and hidden from the model.'),
    env: z
      .record(z.string(), z.string())
      .optional()
      .describe('Extra environment for this tool, hidden from the model.'),
    maxArgumentBytes: z
      .number()
      .int()
      .positive()
      .max(131072)
      .default(16384)
      .describe('Largest argument the model may pass (each string, or the JSON of each other value).'),
    async: z
      .enum(['nats', 'command', 'a2a'])
      .optional()
      .describe(
        "Asynchronous (a living agent's turns only): the turn suspends until the result arrives or asyncTimeoutSeconds pass, then the model gets the result or a timeout report. nats: a request on cmd.tool.<instance>.<name> that a tool service answers on the call's own reply subject; command: argv runs as a supervised background task; a2a: a message to the remote A2A agent at a2a.url, its task followed until it ends or needs input.",
      ),
    a2a: z
      .object({
        url: z
          .url({ protocol: /^https?$/ })
          .describe("The remote agent's A2A URL (its card at <url>/.well-known/agent-card.json)."),
        token: z
          .object({
            env: envName.describe("The pup's variable holding it (a Secret on Kubernetes)."),
          })
          .optional()
          .describe("Its bearer token, from the pup's environment: never a tool's, a model's or a log's."),
      })
      .optional()
      .describe(
        'The remote A2A agent of an async: a2a tool (an agent of another Holt is one: its ingress /a2a/{role}). The model passes message (and task_id to answer a task that needs input).',
      ),
    asyncTimeoutSeconds: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400)
      .default(600)
      .describe('How long an asynchronous call may take before the model gets a timeout report.'),
    terminate: z
      .boolean()
      .default(false)
      .describe(
        "Ends the turn when it succeeds (exit 0): its stdout is the turn's result. Unless mustEndWith names it, only where mustEndWith is unset.",
      ),
    requireApproval: z
      .boolean()
      .default(false)
      .describe(
        "Each call needs a person's approval first: it becomes a Question showing the tool and its arguments, and runs only once a person answers approve (holt answer); a rejection or no answer within approvalTimeoutSeconds refuses it (docs/agents.md, Approval of risky calls).",
      ),
  })
  .refine((t) => t.argv !== undefined || t.async === 'nats' || t.async === 'a2a', {
    message: 'a tool needs argv unless it is async: nats or a2a',
    path: ['argv'],
  })
  .refine((t) => (t.async === 'a2a') === (t.a2a !== undefined), {
    message: 'a2a (the remote agent: url, token) goes with async: a2a, and only with it',
    path: ['a2a'],
  })
  .describe(
    'A tool the model may call. A parameter with format "path" is a path inside the workspace: relative, no "..", no leading "-", no symbolic link out.',
  );

/**
 * An MCP server whose tools the model may call (src/llm/mcp). A stdio server runs where the tools run
 * (the tool runner, never the pup); a remote one is reached by the pup, which alone holds its headers.
 */
export const McpServer = z
  .object({
    name: z
      .string()
      .regex(/^[a-z0-9-]{1,32}$/, 'must be 1-32 of [a-z0-9-]')
      .describe("The server's name; its tools are offered as <name>__<tool>."),
    command: z
      .array(z.string())
      .min(1)
      .optional()
      .describe('A stdio server: the argv the tool runner starts (in the workspace, no shell).'),
    url: z
      .url()
      .optional()
      .describe(
        'A remote server: its Streamable HTTP endpoint (the older SSE transport is tried when it fails).',
      ),
    headers: z
      .record(
        z.string().regex(/^[A-Za-z0-9-]{1,64}$/, 'must be an HTTP header name'),
        z.object({
          env: envName.describe("The pup's variable holding the value (a Secret on Kubernetes)."),
          prefix: z.string().max(64).default('').describe('Put before the value (e.g. "Bearer ").'),
        }),
      )
      .optional()
      .describe(
        "Headers of a remote server, each taken from the pup's environment; never a literal value. They reach no model, tool, log or artefact.",
      ),
    tools: z
      .array(z.string().min(1).max(128))
      .optional()
      .describe("The server's tools offered to the model (their own names); all when omitted."),
    timeoutSeconds: z
      .number()
      .int()
      .positive()
      .max(3600)
      .default(30)
      .describe('Limit of one call (and of connecting); past it the call is cancelled.'),
    requireApproval: z
      .array(z.string().min(1).max(128))
      .default([])
      .describe(
        "Tools that need a person's approval: each call becomes a Question and runs only once a person approves it (as a declared tool's requireApproval).",
      ),
    env: z
      .array(envName)
      .default([])
      .describe(
        "A stdio server: variables passed through to it by name (like a tool's); nothing else of the environment.",
      ),
  })
  .refine((m) => (m.command === undefined) !== (m.url === undefined), {
    message: 'an MCP server needs exactly one of command or url',
  })
  .refine((m) => m.url !== undefined || m.headers === undefined, {
    message: 'headers are for a url server',
    path: ['headers'],
  })
  .describe('An MCP server whose tools the model may call.');
export type McpServer = z.output<typeof McpServer>;

/** A ToolServer of the Agent's namespace whose tools the model may call (Kubernetes only). */
export const ToolServerRef = z
  .object({
    name: z
      .string()
      .regex(/^[a-z0-9-]{1,32}$/, 'must be 1-32 of [a-z0-9-]')
      .describe('The ToolServer (same namespace); its tools are offered as <name>__<tool>.'),
    tools: z
      .array(z.string().min(1).max(128))
      .optional()
      .describe("The server's tools offered to the model (their own names); all when omitted."),
    requireApproval: z
      .array(z.string().min(1).max(128))
      .default([])
      .describe("Tools that need a person's approval before each call."),
  })
  .describe('A ToolServer the model may use.');
export type ToolServerRef = z.output<typeof ToolServerRef>;

/** What is wrong with an agent's MCP servers: a name used twice, a credential passed to a stdio server. */
export function mcpServerProblems(servers: { name: string; env?: string[] }[]): string[] {
  const seen = new Set<string>();
  const secret = new Set([...LLM_KEY_VARS, ...STORE_URL_VARS, 'PGPASSWORD']);
  const out: string[] = [];
  for (const s of servers) {
    if (seen.has(s.name)) out.push(`MCP server ${s.name} is named twice`);
    seen.add(s.name);
    for (const e of s.env ?? [])
      if (secret.has(e))
        out.push(`MCP server ${s.name}: ${e} is a credential of the pup and is never passed on`);
  }
  return out;
}

export const ResultField = z
  .object({
    type: z
      .enum(['string', 'number', 'integer', 'boolean', 'object', 'array'])
      .default('string')
      .describe("The field's JSON type."),
    required: z.boolean().default(true).describe('Whether a result without it is refused.'),
    description: z.string().default('').describe('What the field holds, shown to the model.'),
  })
  .describe('One field every result of this agent carries.');

const stepName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/, 'must be a name of [A-Za-z0-9_-]');
const stepFields = z
  .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be an identifier'), ResultField)
  .optional();

export const WorkflowStep = z
  .object({
    name: stepName.describe(
      'Unique in the workflow; later steps refer to its output as {{name}} or {{name.field}}.',
    ),
    llm: z
      .object({
        prompt: z
          .string()
          .min(1)
          .max(20000)
          .describe(
            'Prompt template: {{target}}, {{target.type}}, {{step}}, {{step.field}}, {{self.success_rate}}, {{self.stuck}}.',
          ),
        output: stepFields.describe(
          'Fields of the JSON object the model answers with (checked); free text when omitted.',
        ),
      })
      .optional()
      .describe('A model call.'),
    code: z
      .object({
        argv: z
          .array(z.string())
          .min(1)
          .optional()
          .describe('Command template, run without a shell in the workspace.'),
        tool: z.string().optional().describe('Or a declared tool, run with args.'),
        args: z.record(z.string(), z.string()).optional().describe("The tool's arguments, as templates."),
        timeoutSeconds: killAfter.describe('Kill the command after this many seconds.'),
        output: stepFields.describe(
          'Fields of the JSON object it prints (checked); its stdout as text when omitted.',
        ),
      })
      .refine(
        (c) => (c.argv === undefined) !== (c.tool === undefined),
        'a code step needs exactly one of argv or tool',
      )
      .optional()
      .describe('A command or a tool.'),
    branch: z
      .object({
        field: z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/)
          .describe('step.field (or target.field) to branch on.'),
        cases: z
          .record(z.string(), z.string())
          .describe('Value → the step to go to ("end" ends the workflow).'),
        default: z
          .string()
          .optional()
          .describe('Where any other value goes; without it, another value fails the turn.'),
      })
      .optional()
      .describe('The next step, chosen by a field.'),
    self_audit: z
      .object({})
      .strict()
      .optional()
      .describe(
        "The agent's self-audit as this step's output: success_rate, turns, failures_in_row, loops, turns_since_progress, stuck, looping, total_turns.",
      ),
  })
  .refine(
    (s) => [s.llm, s.code, s.branch, s.self_audit].filter(Boolean).length === 1,
    'a step is exactly one of llm, code, branch or self_audit',
  )
  .refine((s) => s.name !== 'self' && s.name !== 'target', 'self and target are reserved names')
  .describe('One step of a workflow agent.');

export const AgentLlm = z
  .object({
    model: z.string().min(1).optional().describe('Model name; defaults to the Holt-wide model.'),
    baseUrl: z.url().optional().describe('OpenAI-compatible base URL; defaults to the Holt-wide endpoint.'),
    temperature: z.number().min(0).max(2).optional().describe('Sampling temperature.'),
    maxTokens: z.number().int().positive().optional().describe('Maximum tokens per reply.'),
    timeoutSeconds: z.number().int().positive().max(3600).default(120).describe('Timeout of one model call.'),
    maxSteps: z.number().int().min(1).max(200).default(8).describe('Maximum ReAct steps per turn.'),
    mustEndWith: z
      .string()
      .optional()
      .describe(
        'Tools the turn must end with, comma-separated (e.g. submit_result): no other call ends it, and its last step offers only these.',
      ),
    resultFields: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be an identifier'), ResultField)
      .optional()
      .describe(
        "Fields every result must carry: the result's payload is then a JSON object with them, checked before the turn ends (a result without them is returned to the model with what is wrong).",
      ),
    maxOutputErrors: z
      .number()
      .int()
      .min(1)
      .max(50)
      .default(3)
      .describe(
        'Unusable model outputs in a row (bad arguments, an unknown tool, a result without its fields) shown to the model before the turn fails.',
      ),
    maxToolCallsPerReply: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(8)
      .describe('Tool calls run from one model reply; the rest are refused and the model is told.'),
    planning: z
      .boolean()
      .default(false)
      .describe('Decompose the goal into tasks and subtasks before acting.'),
    workingMemoryBytes: z
      .number()
      .int()
      .nonnegative()
      .default(0)
      .describe('Size of working memory kept between turns (0 = off).'),
    memory: AgentMemory.optional(),
    selfAudit: AgentSelfAudit.optional(),
    turnTimeoutSeconds: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('Wall-clock time box of one turn: past it the turn fails (no limit when unset).'),
    goalTimeoutSeconds: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        "Wall-clock time box of a goal, from its workflow's first artefact: past it the agent's turns on it fail.",
      ),
    historyKeep: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(0)
      .describe(
        'Context compaction: keep the last N exchanges word for word and summarise the earlier ones by a model call (0 = off; 5 suits a coding agent).',
      ),
    workflow: z
      .array(WorkflowStep)
      .min(1)
      .max(50)
      .optional()
      .describe(
        'Run the agent as a workflow of steps instead of the ReAct loop; the last step that ran gives the result. Each finished step is stored, so a killed pup resumes at the step where it stopped.',
      ),
    workItems: z
      .boolean()
      .default(false)
      .describe(
        'Give the model its work items (durable objectives that outlive turns): work_create, work_update, work_pick, work_get, work_list, work_complete.',
      ),
    life: z
      .boolean()
      .default(false)
      .describe(
        'The agent lives (docs/runtime-model.md, living agents): beside its claims it runs turns of its own when messages come in (the ingress, holt send), when its timers and waits end, and for work items that become runnable; it ends them with wait or text. Needs Postgres and NATS; gives the model its work items and the wait tool.',
      ),
    fileTools: z
      .boolean()
      .default(false)
      .describe(
        'Give the model the built-in workspace file tools (workspace_list, workspace_read, workspace_write, workspace_patch); every path is checked to stay in the workspace.',
      ),
    fileToolsAllowGit: z
      .boolean()
      .default(false)
      .describe(
        'Let workspace_write and workspace_patch write in the repository’s .git directory (hooks, config: programs git runs). Refused by default.',
      ),
    stateProbe: z
      .boolean()
      .optional()
      .describe(
        'Show the model the workspace state before each call (files written and still there, last commands, last errors); on with fileTools by default.',
      ),
    approvalTimeoutSeconds: z
      .number()
      .int()
      .positive()
      .max(30 * 86_400)
      .default(3600)
      .describe(
        "How long a call that needs a person's approval waits for the answer; past it the call is refused (the Question stays open).",
      ),
    tools: z.array(AgentTool).default([]).describe('Tools declared for the model.'),
    mcpServers: z
      .array(McpServer)
      .max(20)
      .default([])
      .describe('MCP servers whose tools the model may call, named <server>__<tool>.'),
    toolServers: z
      .array(ToolServerRef)
      .max(20)
      .default([])
      .describe(
        'ToolServers of this namespace whose tools the model may call; the operator adds each to the MCP servers at its Service, and its pods may reach them.',
      ),
    allowedTools: z
      .array(z.string())
      .optional()
      .describe('Allowlist of tool names (built-ins included); all declared tools when omitted.'),
  })
  .describe('Drive this agent with a model (the pup agent loop) instead of, or besides, a command.');

export const AgentBudgets = z
  .object({
    windowSeconds: z.number().int().positive().default(3600).describe('Length of the rolling window.'),
    callsPerWindow: z.number().int().positive().optional().describe('Maximum model calls per window.'),
    tokensPerWindow: z.number().int().positive().optional().describe('Maximum tokens per window.'),
    maxCostUsd: z
      .number()
      .positive()
      .optional()
      .describe('Total cost budget in USD; a call that would exceed it is not made.'),
    maxConsecutiveErrors: z
      .number()
      .int()
      .positive()
      .default(5)
      .describe('Pause the agent after this many errors in a row.'),
  })
  .describe('Budgets and pacing of model use.');

/** What is wrong with a workflow as declared: repeated names, branches to nowhere, unknown tools. */
export function workflowProblems(
  steps: z.output<typeof WorkflowStep>[],
  tools: { name: string; async?: string; requireApproval?: boolean }[],
): string[] {
  const out: string[] = [];
  const names = new Set<string>();
  for (const s of steps) {
    if (names.has(s.name)) out.push(`step ${s.name} is named twice`);
    names.add(s.name);
  }
  for (const s of steps) {
    for (const to of [
      ...Object.values(s.branch?.cases ?? {}),
      ...(s.branch?.default ? [s.branch.default] : []),
    ])
      if (to !== 'end' && !names.has(to)) out.push(`step ${s.name} branches to ${to}, which is no step`);
    if (s.code?.tool && !tools.some((t) => t.name === s.code?.tool))
      out.push(`step ${s.name} runs tool ${s.code.tool}, which is not declared`);
    else if (s.code?.tool && tools.some((t) => t.name === s.code?.tool && t.async))
      out.push(
        `step ${s.name} runs tool ${s.code.tool}, which is asynchronous (a living agent's turns only)`,
      );
    // A code step runs unasked: it must not become the way around a person's approval.
    else if (s.code?.tool && tools.some((t) => t.name === s.code?.tool && t.requireApproval))
      out.push(
        `step ${s.name} runs tool ${s.code.tool}, which needs a person's approval (only the model's calls can wait for one)`,
      );
  }
  return out;
}

/** must_end_with's tool names (comma-separated; empty: any end is fine). */
export function endingToolNames(mustEndWith: string | undefined): string[] {
  return (mustEndWith ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
}

/** Names in must_end_with that could never end a turn: neither submit_result nor a tool with terminate. */
export function unendingTools(
  mustEndWith: string | undefined,
  tools: { name: string; terminate?: boolean }[],
): string[] {
  const ends = new Set(['submit_result', ...tools.filter((t) => t.terminate).map((t) => t.name)]);
  return endingToolNames(mustEndWith).filter((n) => !ends.has(n));
}
