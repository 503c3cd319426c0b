import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { AgentSpec } from './agent.ts';
import { BidType, MAX_REPLICAS, roleName, workerTarget, workspaceMode } from './common.ts';
import { HoltSpec } from './holt.ts';

/**
 * The Holt file: Holt's own holt.yml (version "1.0", its rules: image and command required, a
 * bidding_strategy or bid_script, mode: controller needs worker.image and worker.command) plus this
 * project's extensions (llm, tools, budgets, replicas, stores). Version "2" is the same format with
 * `image` optional, for agents that run as local processes only.
 */
export class HoltFileError extends Error {
  readonly problems: string[];
  constructor(file: string, problems: string[]) {
    super(`${file} is not a valid Holt file:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'HoltFileError';
    this.problems = problems;
  }
}

const duration = z
  .string()
  .regex(/^\d+(ms|s|m|h)$/, 'must be a duration like 30s, 5m or 500ms')
  .transform((s) => {
    const m = /^(\d+)(ms|s|m|h)$/.exec(s)!;
    const n = Number(m[1]);
    const unit = { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] as 'ms' | 's' | 'm' | 'h'];
    return Math.max(1, Math.round(n * unit));
  });

const cmd = z.array(z.string(), 'must be a list of strings').min(1, 'must be a non-empty list of strings');

const fileTool = z.object({
  name: z.string(),
  description: z.string().optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  argv: cmd.optional(),
  timeout: duration.optional(),
  async: z.enum(['nats', 'command']).optional(),
  async_timeout: duration.optional(),
  defaults: z.record(z.string(), z.unknown()).optional(),
  fixed: z.record(z.string(), z.unknown()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  max_argument_bytes: z.number().int().optional(),
  terminate: z.boolean().optional(),
  require_approval: z.boolean().optional(),
});

const fileMcpServer = z.object({
  name: z.string(),
  command: cmd.optional(),
  url: z.string().optional(),
  headers: z.record(z.string(), z.object({ env: z.string(), prefix: z.string().optional() })).optional(),
  tools: z.array(z.string()).optional(),
  timeout_seconds: z.number().int().optional(),
  require_approval: z.array(z.string()).optional(),
  env: z.array(z.string()).optional(),
});

const fileFields = z
  .record(
    z.string(),
    z.object({
      type: z.enum(['string', 'number', 'integer', 'boolean', 'object', 'array']).optional(),
      required: z.boolean().optional(),
      description: z.string().optional(),
    }),
  )
  .optional();
const fileStep = z.object({
  name: z.string(),
  llm: z.object({ prompt: z.string(), output: fileFields }).optional(),
  code: z
    .object({
      argv: z.array(z.string()).optional(),
      tool: z.string().optional(),
      args: z.record(z.string(), z.string()).optional(),
      timeout: duration.optional(),
      output: fileFields,
    })
    .optional(),
  branch: z
    .object({ field: z.string(), cases: z.record(z.string(), z.string()), default: z.string().optional() })
    .optional(),
});

const fileAgent = z.object({
  image: z.string().optional(),
  build: z.object({ context: z.string().optional() }).optional(),
  command: cmd.optional(),
  bid_script: cmd.optional(),
  bidding_strategy: BidType.optional(),
  workspace: z.object({ mode: workspaceMode.optional() }).optional(),
  environment: z.array(z.string()).optional(),
  mode: z.literal('controller', 'mode must be "controller" or omitted').optional(),
  worker: z
    .object({
      image: z.string().optional(),
      command: cmd.optional(),
      max_concurrent: z.number().int().min(0, 'worker.max_concurrent must be >= 1').optional(),
      workspace: z.object({ mode: workspaceMode.optional() }).optional(),
      target: workerTarget.optional(),
    })
    .optional(),
  replicas: z.number().int().min(1).max(MAX_REPLICAS).optional(),
  strategy: z.enum(['reuse', 'fresh_per_call']).optional(),
  resources: z
    .object({
      limits: z.object({ cpus: z.string().optional(), memory: z.string().optional() }).optional(),
      reservations: z.object({ cpus: z.string().optional(), memory: z.string().optional() }).optional(),
    })
    .optional(),
  prompts: z.object({ claim: z.string().optional(), execution: z.string().optional() }).optional(),
  health_check: z
    .object({ command: cmd, interval: duration.optional(), timeout: duration.optional() })
    .optional(),
  // extensions
  bid_with_llm: z.boolean().optional(),
  llm: z
    .object({
      model: z.string().optional(),
      base_url: z.string().optional(),
      temperature: z.number().optional(),
      max_tokens: z.number().int().optional(),
      timeout: duration.optional(),
      max_steps: z.number().int().optional(),
      must_end_with: z.string().optional(),
      result_fields: fileFields,
      max_tool_calls_per_reply: z.number().int().optional(),
      max_output_errors: z.number().int().optional(),
      planning: z.boolean().optional(),
      working_memory_bytes: z.number().int().optional(),
      memory: z
        .object({
          enabled: z.boolean().optional(),
          scope: z.string().optional(),
          top_k: z.number().int().optional(),
          ttl_days: z.number().int().optional(),
          auto: z.boolean().optional(),
          embeddings: z.object({ model: z.string(), base_url: z.string().optional() }).optional(),
        })
        .optional(),
      self_audit: z
        .object({
          enabled: z.boolean().optional(),
          review_every_turns: z.number().int().optional(),
          review_prompt: z.string().optional(),
        })
        .optional(),
      tools: z.array(fileTool).optional(),
      mcp_servers: z.array(fileMcpServer).optional(),
      approval_timeout: duration.optional(),
      allowed_tools: z.array(z.string()).optional(),
      file_tools: z.boolean().optional(),
      file_tools_allow_git: z.boolean().optional(),
      work_items: z.boolean().optional(),
      life: z.boolean().optional(),
      workflow: z.array(fileStep).optional(),
      history_keep: z.number().int().optional(),
      turn_timeout: duration.optional(),
      goal_timeout: duration.optional(),
      state_probe: z.boolean().optional(),
    })
    .optional(),
  budgets: z
    .object({
      window: duration.optional(),
      calls_per_window: z.number().int().optional(),
      tokens_per_window: z.number().int().optional(),
      max_cost_usd: z.number().optional(),
      max_consecutive_errors: z.number().int().optional(),
    })
    .optional(),
  egress: z.boolean().optional(),
  egress_to: z
    .object({ cidrs: z.array(z.string()).optional(), ports: z.array(z.number().int()).optional() })
    .optional(),
});
type FileAgent = z.infer<typeof fileAgent>;

const fileSchema = z.object({
  version: z.union([z.literal('1.0'), z.literal('2')], 'version must be "1.0" (Holt) or "2"'),
  name: z.string().optional(),
  orchestrator: z
    .object({
      max_review_iterations: z
        .number()
        .int()
        .min(0, 'orchestrator.max_review_iterations must be >= 0')
        .optional(),
      bid_timeout: duration.optional(),
      max_bid_timeout: duration.optional(),
    })
    .nullish(),
  agents: z.record(z.string(), fileAgent, 'agents must be a map of role to agent'),
  services: z
    .object({
      redis: z.object({ image: z.string().optional(), url: z.string().optional() }).optional(),
      orchestrator: z.object({ image: z.string().optional() }).optional(),
      nats: z.object({ url: z.string().optional() }).optional(),
      postgres: z.object({ url: z.string().optional() }).optional(),
    })
    .nullish(),
  llm: z
    .object({
      base_url: z.string().optional(),
      model: z.string().optional(),
      api_key_env: z.string().optional(),
    })
    .optional(),
  workspace: z.object({ path: z.string().optional(), git_url: z.string().optional() }).optional(),
});

export interface HoltFileAgent extends AgentSpec {
  role: string;
}

export interface HoltFile {
  version: '1.0' | '2';
  name?: string;
  holt: HoltSpec;
  agents: HoltFileAgent[];
  /** Ignored keys and style hints, shown to the user but not fatal (Holt ignores unknown keys too). */
  warnings: string[];
}

function issues(e: z.ZodError, prefix = ''): string[] {
  return e.issues.map((i) => {
    const path = [prefix, ...i.path.map(String)].filter(Boolean).join('.');
    return path ? `${path}: ${i.message}` : i.message;
  });
}

function envList(list: string[] | undefined): { name: string; value: string }[] {
  return (list ?? []).map((entry) => {
    const eq = entry.indexOf('=');
    return eq < 0 ? { name: entry, value: '' } : { name: entry.slice(0, eq), value: entry.slice(eq + 1) };
  });
}

function toAgent(
  role: string,
  a: FileAgent,
  version: '1.0' | '2',
  problems: string[],
): HoltFileAgent | undefined {
  const at = `agents.${role}`;
  const before = problems.length;
  const roleCheck = roleName.safeParse(role);
  if (!roleCheck.success) problems.push(`${at}: ${roleCheck.error.issues[0]?.message}`);
  if (version === '1.0' && !a.image) problems.push(`${at}.image: required`);
  if (!a.command && !a.llm) problems.push(`${at}.command: required (a non-empty list of strings)`);
  if (!a.bidding_strategy && !a.bid_script && !a.bid_with_llm)
    problems.push(`${at}.bidding_strategy: required unless bid_script is given`);
  if (a.mode === 'controller') {
    if (!a.worker?.image && version === '1.0')
      problems.push(`${at}.worker.image: required when mode is "controller"`);
    if (!a.worker?.command) problems.push(`${at}.worker.command: required when mode is "controller"`);
  }
  if (problems.length > before) return undefined;
  const res = a.resources;
  const cpuMem = (r?: { cpus?: string; memory?: string }) =>
    r
      ? Object.fromEntries(Object.entries({ cpu: r.cpus, memory: r.memory }).filter(([, v]) => v))
      : undefined;
  const spec = {
    role,
    image: a.image,
    command: a.command,
    env: envList(a.environment),
    resources: res ? { requests: cpuMem(res.reservations), limits: cpuMem(res.limits) } : undefined,
    bidding: { strategy: a.bidding_strategy, script: a.bid_script, llm: a.bid_with_llm },
    prompts: a.prompts ?? {},
    replicas: a.replicas ?? 1,
    strategy: a.strategy ?? 'reuse',
    workspace: { mode: a.workspace?.mode ?? 'ro' },
    healthCheck: a.health_check
      ? {
          command: a.health_check.command,
          intervalSeconds: a.health_check.interval,
          timeoutSeconds: a.health_check.timeout,
        }
      : undefined,
    llm: a.llm
      ? {
          model: a.llm.model,
          baseUrl: a.llm.base_url,
          temperature: a.llm.temperature,
          maxTokens: a.llm.max_tokens,
          timeoutSeconds: a.llm.timeout,
          maxSteps: a.llm.max_steps,
          mustEndWith: a.llm.must_end_with,
          resultFields: a.llm.result_fields,
          maxToolCallsPerReply: a.llm.max_tool_calls_per_reply,
          maxOutputErrors: a.llm.max_output_errors,
          planning: a.llm.planning,
          workingMemoryBytes: a.llm.working_memory_bytes,
          memory: a.llm.memory && {
            enabled: a.llm.memory.enabled,
            scope: a.llm.memory.scope,
            topK: a.llm.memory.top_k,
            ttlDays: a.llm.memory.ttl_days,
            auto: a.llm.memory.auto,
            embeddings: a.llm.memory.embeddings && {
              model: a.llm.memory.embeddings.model,
              baseUrl: a.llm.memory.embeddings.base_url,
            },
          },
          selfAudit: a.llm.self_audit && {
            enabled: a.llm.self_audit.enabled,
            reviewEveryTurns: a.llm.self_audit.review_every_turns,
            reviewPrompt: a.llm.self_audit.review_prompt,
          },
          tools: a.llm.tools?.map(
            ({ timeout, max_argument_bytes, async_timeout, require_approval, ...t }) => ({
              ...t,
              requireApproval: require_approval,
              timeoutSeconds: timeout,
              maxArgumentBytes: max_argument_bytes,
              asyncTimeoutSeconds: async_timeout,
            }),
          ),
          mcpServers: a.llm.mcp_servers?.map(({ timeout_seconds, require_approval, ...m }) => ({
            ...m,
            timeoutSeconds: timeout_seconds,
            requireApproval: require_approval,
          })),
          approvalTimeoutSeconds: a.llm.approval_timeout,
          allowedTools: a.llm.allowed_tools,
          fileTools: a.llm.file_tools,
          fileToolsAllowGit: a.llm.file_tools_allow_git,
          workItems: a.llm.work_items,
          life: a.llm.life,
          workflow: a.llm.workflow?.map(({ code, ...st }) => ({
            ...st,
            ...(code ? { code: { ...code, timeout: undefined, timeoutSeconds: code.timeout } } : {}),
          })),
          historyKeep: a.llm.history_keep,
          turnTimeoutSeconds: a.llm.turn_timeout,
          goalTimeoutSeconds: a.llm.goal_timeout,
          stateProbe: a.llm.state_probe,
        }
      : undefined,
    budgets: a.budgets
      ? {
          windowSeconds: a.budgets.window,
          callsPerWindow: a.budgets.calls_per_window,
          tokensPerWindow: a.budgets.tokens_per_window,
          maxCostUsd: a.budgets.max_cost_usd,
          maxConsecutiveErrors: a.budgets.max_consecutive_errors,
        }
      : undefined,
    worker:
      a.mode === 'controller' || (version === '2' && a.worker)
        ? {
            image: a.worker?.image,
            command: a.worker?.command,
            // Holt: 0 means 1, negative is an error (checked above).
            maxConcurrent: Math.max(1, a.worker?.max_concurrent ?? 1),
            workspaceMode: a.worker?.workspace?.mode,
            target: a.worker?.target,
          }
        : undefined,
    egress: a.egress ?? false,
    egressTo: a.egress_to,
  };
  const parsed = AgentSpec.safeParse(spec);
  if (!parsed.success) {
    problems.push(...issues(parsed.error, at));
    return undefined;
  }
  return { ...parsed.data, role };
}

const KNOWN_AGENT_KEYS = new Set(Object.keys(fileAgent.shape));
const KNOWN_TOP_KEYS = new Set(Object.keys(fileSchema.shape));

/** Parses the text of a Holt file. Throws HoltFileError listing every problem, each with its path. */
export function parseHoltFile(text: string, file = 'holt.yml'): HoltFile {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (e) {
    throw new HoltFileError(file, [`not valid YAML: ${(e as Error).message.split('\n')[0]}`]);
  }
  const top = fileSchema.safeParse(raw);
  if (!top.success) throw new HoltFileError(file, issues(top.error));
  const f = top.data;
  const problems: string[] = [];
  const warnings: string[] = [];
  const rawObj = raw as Record<string, unknown>;
  for (const k of Object.keys(rawObj))
    if (!KNOWN_TOP_KEYS.has(k)) warnings.push(`unknown key "${k}" ignored`);
  const roles = Object.keys(f.agents);
  if (roles.length === 0) problems.push('agents: at least one agent is required');
  const agents: HoltFileAgent[] = [];
  for (const role of roles) {
    const rawAgent = (rawObj.agents as Record<string, Record<string, unknown>>)[role] ?? {};
    for (const k of Object.keys(rawAgent))
      if (!KNOWN_AGENT_KEYS.has(k)) warnings.push(`agents.${role}: unknown key "${k}" ignored`);
    if (/^[a-z]/.test(role)) warnings.push(`agents.${role}: role names are conventionally PascalCase`);
    const a = toAgent(role, f.agents[role]!, f.version, problems);
    if (a) agents.push(a);
  }
  const targets = new Map<string, string>();
  for (const a of agents) {
    if (!a.worker && a.replicas === 1 && a.strategy === 'reuse') continue;
    const t = a.worker?.target ?? a.role.toLowerCase();
    const other = targets.get(t);
    if (other) problems.push(`agents.${a.role}: worker target "${t}" is also used by ${other}`);
    targets.set(t, a.role);
  }
  const o = f.orchestrator;
  if (o?.max_bid_timeout !== undefined && o.max_bid_timeout < (o.bid_timeout ?? 30))
    problems.push('orchestrator.max_bid_timeout: must be at least orchestrator.bid_timeout (30s by default)');
  if (problems.length) throw new HoltFileError(file, problems);
  const holt = HoltSpec.parse({
    stores: {
      redis: f.services?.redis?.url ? { mode: 'external', url: f.services.redis.url } : undefined,
      nats: f.services?.nats?.url ? { mode: 'external', url: f.services.nats.url } : undefined,
      postgres: f.services?.postgres?.url ? { mode: 'external', url: f.services.postgres.url } : undefined,
    },
    orchestrator: {
      maxReviewIterations: f.orchestrator?.max_review_iterations ?? 3,
      bidTimeoutSeconds: f.orchestrator?.bid_timeout ?? 30,
      maxBidTimeoutSeconds: f.orchestrator?.max_bid_timeout,
    },
    llm: f.llm ? { baseUrl: f.llm.base_url, model: f.llm.model, apiKeyEnv: f.llm.api_key_env } : undefined,
    workspace: { path: f.workspace?.path, gitUrl: f.workspace?.git_url },
  });
  return { version: f.version, name: f.name, holt, agents, warnings };
}

export function loadHoltFile(path: string): HoltFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new HoltFileError(path, [
      `cannot read the file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    ]);
  }
  return parseHoltFile(text, path);
}
