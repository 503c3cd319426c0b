import { z } from 'zod';
import { isCidr } from '../common/cidr.ts';
import {
  argv,
  BidType,
  dnsLabel,
  envList,
  holtName,
  MAX_REPLICAS,
  resources,
  roleName,
  workerTarget,
  workspaceMode,
} from './common.ts';

export const AgentBidding = z
  .object({
    strategy: BidType.optional().describe(
      'Static bid for every claim: review, claim, exclusive or ignore. Also the fallback when the bid script or LLM bid fails.',
    ),
    script: argv
      .optional()
      .describe(
        'Bid script argv (no shell): gets the target artefact JSON on stdin, prints one of review|claim|exclusive|ignore.',
      ),
    llm: z.boolean().optional().describe('Ask the model to bid, with prompts.claim and the target artefact.'),
  })
  .describe('How this agent bids on claims. At least one of strategy, script or llm is required.');

/** A run's time limit in seconds (a tool's, a workflow's code step's). */
const killAfter = z.number().int().positive().max(3600).default(60);

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
      .enum(['nats', 'command'])
      .optional()
      .describe(
        "Asynchronous (a living agent's turns only): the turn suspends until the result arrives or asyncTimeoutSeconds pass, then the model gets the result or a timeout report. nats: a request on cmd.tool.<instance>.<name> that a tool service answers on the call's own reply subject; command: argv runs as a supervised background task.",
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
  })
  .refine((t) => t.argv !== undefined || t.async === 'nats', {
    message: 'a tool needs argv unless it is async: nats',
    path: ['argv'],
  })
  .describe(
    'A tool the model may call. A parameter with format "path" is a path inside the workspace: relative, no "..", no leading "-", no symbolic link out.',
  );

const cidr = z.string().refine((v) => isCidr(v), 'must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32');

export const AgentEgress = z
  .object({
    cidrs: z
      .array(cidr)
      .min(1)
      .default(['0.0.0.0/0', '::/0'])
      .describe(
        "Destinations an agent with egress may reach. The clouds' metadata addresses (169.254.0.0/16, 100.100.100.200, fd00:ec2::254, fe80::/10) and the cluster CIDRs the operator is given are always excepted.",
      ),
    ports: z
      .array(z.number().int().min(1).max(65535))
      .min(1)
      .optional()
      .describe("TCP ports; by default the port of the agent's LLM endpoint (443 when it names none)."),
    pods: z
      .array(
        z.object({
          namespace: z.string().optional().describe("The pods' namespace; the Agent's own when omitted."),
          labels: z.record(z.string(), z.string()).describe('Labels the pods carry (e.g. app: vllm).'),
        }),
      )
      .default([])
      .describe(
        'In-cluster endpoints (a model server behind a Service) the agent may reach on the same ports: the cluster CIDRs are excepted from cidrs, so pods are named here.',
      ),
  })
  .describe('Where an agent with egress may connect (a NetworkPolicy for its pods).');

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
          .describe('Prompt template: {{target}}, {{target.type}}, {{step}}, {{step.field}}.'),
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
  })
  .refine(
    (s) => [s.llm, s.code, s.branch].filter(Boolean).length === 1,
    'a step is exactly one of llm, code or branch',
  )
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
        'The agent lives (seed 003): beside its claims it runs turns of its own when messages come in (the ingress, holt send), when its timers and waits end, and for work items that become runnable; it ends them with wait or text. Needs Postgres and NATS; gives the model its work items and the wait tool.',
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
    tools: z.array(AgentTool).default([]).describe('Tools declared for the model.'),
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

export const HealthCheck = z
  .object({
    command: argv.describe('Command run in the workspace; exit 0 means healthy.'),
    intervalSeconds: z.number().int().positive().default(30).describe('Seconds between runs.'),
    timeoutSeconds: z.number().int().positive().default(5).describe('Seconds before a run counts as failed.'),
  })
  .describe('Custom health check that /healthz includes.');

export const AgentWorker = z
  .object({
    image: z.string().min(1).optional().describe('Image of the worker pods (defaults to the agent image).'),
    command: argv.optional().describe('Tool argv the workers run (defaults to the agent command).'),
    maxConcurrent: z
      .number()
      .int()
      .min(1)
      .max(MAX_REPLICAS)
      .default(1)
      .describe('At most this many claims of the role run at once.'),
    workspaceMode: workspaceMode.optional(),
    target: workerTarget.optional().describe('Worker target (defaults to the role, lower-cased).'),
  })
  .describe("Holt's controller/worker form: a controller bids, workers execute.");

const INGRESS_MODES = ['enqueue_message', 'wake_hint'] as const;

export const AgentIngressToken = z
  .object({
    name: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$/, 'a token name is a DNS label of at most 32')
      .describe('Token name (shown as the admission label of what it lets in).'),
    secretName: z
      .string()
      .optional()
      .describe(
        'A Secret of yours holding the token under the key `token` (never changed by the operator). Without it the operator makes `<agent>-ingress-<name>` with a random token; delete that Secret to revoke the token (a new one is made in its place).',
      ),
    modes: z
      .array(z.enum(INGRESS_MODES))
      .min(1)
      .optional()
      .describe("What it may do (default: the ingress's modes)."),
    origin: z
      .enum(['operator', 'webhook', 'callback'])
      .default('webhook')
      .describe(
        'What it admits: operator (instructions), webhook (external evidence, never instructions) or callback (signals).',
      ),
    ratePerMinute: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .optional()
      .describe("Requests a minute (default: the ingress's rateLimitPerMinute)."),
  })
  .describe("A capability token of the agent's ingress.");

export const AgentIngress = z
  .object({
    enabled: z.boolean().default(false).describe("Serve the agent's ingress (an LLM agent; it then lives)."),
    modes: z
      .array(z.enum(INGRESS_MODES))
      .min(1)
      .default([...INGRESS_MODES])
      .describe('enqueue_message: the body becomes a message the model reads; wake_hint: a wake only.'),
    tokens: z
      .array(AgentIngressToken)
      .max(20)
      .default([{ name: 'default', origin: 'webhook' }])
      .describe('Its capability tokens, stored hashed by the orchestrator.'),
    rateLimitPerMinute: z.number().int().min(1).max(100_000).default(60).describe('Per token.'),
  })
  .describe(
    "External ingress (seed 003): POST /v1/agents/{role}/messages and /wake on the orchestrator's ingress port, with a capability token.",
  );

const agentSpecShape = {
  role: roleName
    .optional()
    .describe('The agent role (defaults to metadata.name in Kubernetes, the map key in a Holt file).'),
  image: z
    .string()
    .min(1)
    .optional()
    .describe("Container image of the agent's tools (holt up runs them in it too, unless --no-containers)."),
  command: argv
    .optional()
    .describe('Tool argv run for each granted claim (no shell). Required unless llm is set.'),
  env: envList.describe('Environment of the agent process.'),
  resources: resources.optional(),
  bidding: AgentBidding,
  prompts: z
    .object({
      claim: z.string().optional().describe('Prompt used to decide the bid (LLM bidding).'),
      execution: z.string().optional().describe('System prompt of the execution turn (LLM agents).'),
    })
    .default({})
    .describe('Prompts for LLM agents.'),
  replicas: z
    .number()
    .int()
    .min(1)
    .max(MAX_REPLICAS)
    .default(1)
    .describe(
      '1: one standard pup. More than 1: a controller bids and this many workers execute from the inbox.',
    ),
  strategy: z
    .enum(['reuse', 'fresh_per_call'])
    .default('reuse')
    .describe('reuse: long-lived workers; fresh_per_call: one Job per claim.'),
  workspace: z
    .object({ mode: workspaceMode.default('ro') })
    .default({ mode: 'ro' })
    .describe('Workspace mount.'),
  healthCheck: HealthCheck.optional(),
  llm: AgentLlm.optional(),
  budgets: AgentBudgets.optional(),
  worker: AgentWorker.optional(),
  workerPool: z
    .string()
    .optional()
    .describe('Name of an existing WorkerPool to use instead of creating one.'),
  egress: z
    .boolean()
    .default(false)
    .describe(
      'Allow network egress beyond the Holt stores, to what egressTo declares (by default the LLM endpoint port on any address outside the cluster).',
    ),
  egressTo: AgentEgress.optional(),
  dns: z
    .enum(['allow', 'deny'])
    .optional()
    .describe(
      "Cluster DNS for the agent's pods (Kubernetes). deny: no DNS at all (the pods find their Holt's bundled stores in /etc/hosts, written from the stores' Service addresses), so a tool cannot carry data out in DNS queries. Unset: deny when the agent has no egress and every store of its Holt is bundled, else allow.",
    ),
  ingress: AgentIngress.optional(),
};

/** What is wrong with a workflow as declared: repeated names, branches to nowhere, unknown tools. */
export function workflowProblems(
  steps: z.output<typeof WorkflowStep>[],
  tools: { name: string; async?: string }[],
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

function checkAgent(a: z.infer<z.ZodObject<typeof agentSpecShape>>, ctx: z.RefinementCtx): void {
  if (!a.command && !a.llm)
    ctx.addIssue({ code: 'custom', path: ['command'], message: 'command is required unless llm is set' });
  for (const problem of workflowProblems(a.llm?.workflow ?? [], a.llm?.tools ?? []))
    ctx.addIssue({ code: 'custom', path: ['llm', 'workflow'], message: problem });
  const unending = a.llm ? unendingTools(a.llm.mustEndWith, a.llm.tools) : [];
  if (unending.length)
    ctx.addIssue({
      code: 'custom',
      path: ['llm', 'mustEndWith'],
      message: `${unending.join(', ')} cannot end a turn: name submit_result or a tool with terminate: true`,
    });
  if (a.ingress?.enabled && !a.llm)
    ctx.addIssue({
      code: 'custom',
      path: ['ingress'],
      message: 'ingress is for LLM agents (spec.llm): a message needs a model to read it',
    });
  const names = (a.ingress?.tokens ?? []).map((t) => t.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length)
    ctx.addIssue({
      code: 'custom',
      path: ['ingress', 'tokens'],
      message: `token ${twice[0]} is named twice`,
    });
  if (!a.bidding.strategy && !a.bidding.script && !a.bidding.llm)
    ctx.addIssue({
      code: 'custom',
      path: ['bidding'],
      message: 'bidding needs a strategy, a script or llm: true',
    });
}

/** The agent as the engine sees it, wherever it came from (holt.yml, Holt file or an Agent resource). */
export const AgentSpec = z.object(agentSpecShape).superRefine(checkAgent);
export type AgentSpec = z.infer<typeof AgentSpec>;

export const AgentVolume = z
  .object({
    name: dnsLabel.describe('Volume name (a DNS label), unique within the agent.'),
    mountPath: z
      .string()
      .regex(/^\/[^:]*$/, 'mountPath must be an absolute path without ":"')
      .max(1024)
      .describe('Absolute path where the volume appears in the agent container (always read-only).'),
    configMap: z.string().min(1).optional().describe('Name of a ConfigMap in the same namespace.'),
    secret: z.string().min(1).optional().describe('Name of a Secret in the same namespace.'),
  })
  .refine((v) => (v.configMap === undefined) !== (v.secret === undefined), {
    message: 'a volume needs exactly one of configMap or secret',
  })
  .describe(
    'A ConfigMap or Secret mounted read-only into the agent container (scripts, prompts, certificates).',
  );

/** spec of the Agent resource: the engine's AgentSpec plus what only Kubernetes needs. */
export const AgentResourceSpec = z
  .object({
    holt: holtName.describe('Name of the Holt (same namespace) this agent belongs to.'),
    ...agentSpecShape,
    volumes: z
      .array(AgentVolume)
      .max(16)
      .default([])
      .refine((vs) => new Set(vs.map((v) => v.name)).size === vs.length, {
        message: 'volume names must be unique',
      })
      .describe('Extra read-only volumes (Kubernetes only).'),
  })
  .superRefine((a, ctx) => {
    checkAgent(a, ctx);
    if (a.workerPool !== undefined && !isScalable(a))
      ctx.addIssue({
        code: 'custom',
        path: ['workerPool'],
        message: 'workerPool is only used by scalable agents (replicas > 1, fresh_per_call or worker)',
      });
  });
export type AgentResourceSpec = z.infer<typeof AgentResourceSpec>;
export type AgentVolume = z.infer<typeof AgentVolume>;

/** Whether grants of this agent go to workers (inbox + doorbell) rather than to one standard pup. */
export function isScalable(a: Pick<AgentSpec, 'replicas' | 'strategy' | 'worker'>): boolean {
  return a.replicas > 1 || a.strategy === 'fresh_per_call' || a.worker !== undefined;
}

/** Worker target of a scalable agent: explicit, else the role lower-cased into a subject token. */
export function workerTargetOf(a: Pick<AgentSpec, 'role' | 'worker'>, role: string): string {
  return a.worker?.target ?? role.toLowerCase().replace(/[^a-z0-9_-]/g, '-');
}
