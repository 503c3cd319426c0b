import { z } from 'zod';
import { Callback } from '../common/callback.ts';
import { isCidr } from '../common/cidr.ts';
import { AgentBudgets, AgentLlm, mcpServerProblems, unendingTools, workflowProblems } from './agent-llm.ts';
import {
  argv,
  BidType,
  dnsLabel,
  envList,
  holtName,
  MAX_REPLICAS,
  resources,
  roleName,
  tokenName,
  workerTarget,
  workspaceMode,
} from './common.ts';

// The model settings (spec.llm, spec.budgets) live in agent-llm.ts; re-exported so importers keep one path.
export {
  AgentBudgets,
  AgentLlm,
  AgentTool,
  endingToolNames,
  McpServer,
  mcpServerProblems,
  ResultField,
  unendingTools,
  WorkflowStep,
  workflowProblems,
} from './agent-llm.ts';

import { targetOfRole } from '../blackboard/targets.ts';

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
    name: tokenName.describe('Token name (shown as the admission label of what it lets in).'),
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
    callbacks: z
      .array(Callback)
      .max(20)
      .default([])
      .describe(
        'Where its messages may ask their outcome to be delivered ("reply_to": "<name>" in the body): a name and an http(s) URL. The orchestrator POSTs the outcome there, signed with HMAC-SHA256 keyed by the hex SHA-256 of the token (docs/agents.md § Delivery). A message can never give a URL of its own.',
      ),
    maxPriority: z
      .number()
      .int()
      .min(0)
      .max(9)
      .default(0)
      .describe(
        'The highest priority (0-9) its messages may ask for with "priority" in their body; the agent reads higher ones first. 0: every message of this token is of the default priority.',
      ),
  })
  .describe("A capability token of the agent's ingress.");

/** One skill of an agent's A2A card (what callers read to choose it). */
export const A2ASkill = z.object({
  id: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, 'a skill id is 1-64 of [A-Za-z0-9._-]')
    .describe("The skill's id."),
  name: z.string().min(1).max(200).describe("The skill's name."),
  description: z.string().max(2000).default('').describe('What the skill does.'),
  tags: z.array(z.string().min(1).max(64)).max(20).default([]).describe('Keywords for callers.'),
  examples: z.array(z.string().min(1).max(500)).max(10).default([]).describe('Example requests.'),
});

export const AgentA2A = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe('Serve the agent over A2A at /a2a/{role} on the ingress port, with the same tokens.'),
    description: z.string().max(2000).default('').describe("The agent card's description."),
    skills: z
      .array(A2ASkill)
      .max(32)
      .default([])
      .describe("The agent card's skills (one made from the role when none)."),
  })
  .describe(
    'The agent over A2A (docs/agents.md § Reaching agents over A2A): an agent card, message/send and /stream, tasks/get, /cancel and /resubscribe.',
  );

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
      .default([{ name: 'default', origin: 'webhook', maxPriority: 0, callbacks: [] }])
      .describe('Its capability tokens, stored hashed by the orchestrator.'),
    rateLimitPerMinute: z.number().int().min(1).max(100_000).default(60).describe('Per token.'),
    a2a: AgentA2A.default({ enabled: true, description: '', skills: [] }),
  })
  .describe(
    "External ingress of a living agent (docs/runtime-model.md): POST /v1/agents/{role}/messages and /wake on the orchestrator's ingress port, with a capability token.",
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
  for (const problem of mcpServerProblems([...(a.llm?.mcpServers ?? []), ...(a.llm?.toolServers ?? [])]))
    ctx.addIssue({ code: 'custom', path: ['llm', 'mcpServers'], message: problem });
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
  return a.worker?.target ?? targetOfRole(role);
}
