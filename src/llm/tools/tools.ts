import { z } from 'zod';
import type { AgentTool } from '../../api/agent.ts';
import { formatIssues } from '../../common/config.ts';
import type { ToolSpec } from '../model/model.ts';
import { isMemoryTool, MEMORY_TOOLS } from './memory-tools.ts';
import { isWorkTool, WORK_TOOLS } from './work-tools.ts';
import { FILE_TOOLS, isFileTool } from './workspace-tools.ts';

type Tool = z.output<typeof AgentTool>;
type Json = Record<string, unknown>;

export const SUBMIT_RESULT = 'submit_result';
export const ASK_QUESTION = 'ask_question';
export const MARK_SUBTASK_COMPLETE = 'mark_subtask_complete';
export const UPDATE_MEMORY = 'update_working_memory';
export const WAIT = 'wait';

/** submit_result's arguments: Holt's tool contract (a Failure is the runtime's to write, not the model's). */
export const SubmitArgs = z.object({
  artefact_type: z.string().min(1, 'must not be empty'),
  artefact_payload: z.string(),
  summary: z.string().min(1, 'must not be empty'),
  structural_type: z.enum(['Standard', 'Review', 'Answer', 'Terminal']).optional(),
});
const seconds = z
  .number()
  .int()
  .positive()
  .max(30 * 86_400);
export const AskArgs = z.object({
  question: z.string().min(1, 'must not be empty'),
  /** Past it, the answer the turn gets is a timeout report (the question stays open for people). */
  deadline_seconds: seconds.optional(),
});
/** A living agent's wait (src/life): the turn ends, and the agent sleeps until it ends. */
export const WaitArgs = z
  .object({
    for: z.enum(['timer', 'message', 'operator']),
    seconds: seconds.optional(),
    on: z.string().min(1).max(300).optional(),
    item_id: z.uuid().optional(),
  })
  .refine((a) => a.for !== 'timer' || a.seconds !== undefined, 'a timer needs seconds');
export type WaitArgs = z.infer<typeof WaitArgs>;
export const MarkArgs = z.object({ success: z.boolean(), reason: z.string().default('') });
export const MemoryArgs = z.object({ content: z.string() });

/** The built-ins every turn may be offered; turn/builtins.ts has a handler for each (the compiler checks). */
const CORE_SPECS = {
  [SUBMIT_RESULT]: {
    description:
      'Submit the result of this turn and end it (once per turn). artefact_payload is the result itself; for a review, "{}" approves and anything else is feedback.',
    schema: SubmitArgs,
  },
  [ASK_QUESTION]: {
    description:
      'Ask a human a question and wait for the answer; the turn resumes when it arrives, or with a timeout report once deadline_seconds pass.',
    schema: AskArgs,
  },
  [WAIT]: {
    description:
      'End this turn and sleep until something happens: for "timer", after seconds; for "message", until a message comes in (seconds is then the deadline: past it you are woken with a timeout report); for "operator", until an operator writes. item_id (default: your current work item) is marked waiting meanwhile.',
    schema: WaitArgs,
  },
  [MARK_SUBTASK_COMPLETE]: {
    description:
      'Mark the active subtask of the plan as done (success=true) or failed (success=false, reason).',
    schema: MarkArgs,
  },
  [UPDATE_MEMORY]: {
    description: 'Replace your working memory (kept between turns, size-limited) with content.',
    schema: MemoryArgs,
  },
} satisfies Record<string, { description: string; schema: z.ZodType }>;
export type CoreBuiltin = keyof typeof CORE_SPECS;

// The workspace file tools and the work item tools are built-ins too, offered only to agents that ask.
const builtinSpecs: Record<string, { description: string; schema: z.ZodType }> = {
  ...CORE_SPECS,
  ...FILE_TOOLS,
  ...WORK_TOOLS,
  ...MEMORY_TOOLS,
};

export const BUILTINS = Object.keys(builtinSpecs);

/** What the model passes to a remote A2A agent (an async: a2a tool declaring no parameters of its own). */
export const A2A_CALL_PARAMETERS = {
  type: 'object',
  properties: {
    message: { type: 'string', minLength: 1, description: 'What to ask or tell the remote agent.' },
    task_id: {
      type: 'string',
      description: "Answer the remote agent's task that needs input (its id, from the earlier result).",
    },
  },
  required: ['message'],
} as const;

/** The parameters the model sees: `fixed` arguments are injected later and hidden from it. */
export function visibleParameters(t: Tool): Json {
  const fixed = new Set(Object.keys(t.fixed ?? {}));
  const declared = Object.keys((t.parameters.properties ?? {}) as Json).length > 0;
  const p = { ...(t.async === 'a2a' && !declared ? A2A_CALL_PARAMETERS : t.parameters) } as Json;
  const props = (p.properties ?? {}) as Json;
  p.properties = Object.fromEntries(Object.entries(props).filter(([k]) => !fixed.has(k)));
  if (Array.isArray(p.required)) p.required = (p.required as string[]).filter((k) => !fixed.has(k));
  if (!p.type) p.type = 'object';
  return p;
}

export interface ToolSet {
  declared: Map<string, Tool>;
  builtins: string[];
  specs: ToolSpec[];
}

/**
 * The tools of a turn: declared tools and built-ins filtered by the allowlist (submit_result is there
 * unless must_end_with leaves it out: a turn must be able to end). ask_question and
 * mark_subtask_complete only where they apply.
 */
export function buildToolSet(
  tools: Tool[],
  opts: {
    allowed?: string[];
    planning: boolean;
    memory: boolean;
    /** false when must_end_with leaves submit_result out. */
    submit?: boolean;
    /** The declared result fields, described: submit_result's description names them. */
    resultFields?: string;
    /** The built-in workspace file tools (workspace-tools.ts). */
    files?: boolean;
    /** The work item tools (work-tools.ts). */
    work?: boolean;
    /** The long-term memory tools (memory-tools.ts). */
    longMemory?: boolean;
    /** A life turn (src/life): `wait` is offered, ask_question is not (no claim to ask from). */
    life?: boolean;
    /** The MCP servers' tools and built-ins (src/llm/mcp), as they are when the turn starts. */
    mcp?: ToolSpec[];
  },
): ToolSet {
  const allow = (n: string) => !opts.allowed || opts.allowed.includes(n);
  const declared = new Map(
    tools.filter((t) => allow(t.name) && !BUILTINS.includes(t.name)).map((t) => [t.name, t]),
  );
  const builtins = BUILTINS.filter(
    (b) =>
      (b === SUBMIT_RESULT && opts.submit !== false) ||
      (b !== SUBMIT_RESULT &&
        allow(b) &&
        (b !== MARK_SUBTASK_COMPLETE || opts.planning) &&
        (b !== UPDATE_MEMORY || opts.memory) &&
        (b !== WAIT || opts.life === true) &&
        (b !== ASK_QUESTION || opts.life !== true) &&
        (!isFileTool(b) || opts.files === true) &&
        (!isWorkTool(b) || opts.work === true) &&
        (!isMemoryTool(b) || opts.longMemory === true)),
  );
  const specs: ToolSpec[] = [
    ...[...declared.values()].map((t) => ({
      type: 'function' as const,
      function: { name: t.name, description: t.description, parameters: visibleParameters(t) },
    })),
    ...builtins.map((b) => ({
      type: 'function' as const,
      function: {
        name: b,
        description:
          b === SUBMIT_RESULT && opts.resultFields
            ? `${builtinSpecs[b]!.description} artefact_payload must be a JSON object with these fields:\n${opts.resultFields}`
            : builtinSpecs[b]!.description,
        parameters: z.toJSONSchema(builtinSpecs[b]!.schema, { io: 'input' }) as Json,
      },
    })),
  ];
  // A declared tool or a built-in keeps its name; an MCP tool of the same name is not offered.
  const taken = new Set(specs.map((x) => x.function.name));
  specs.push(...(opts.mcp ?? []).filter((x) => !taken.has(x.function.name)));
  return { declared, builtins, specs };
}

export const specsNamed = (s: ToolSet, names: string[]) =>
  s.specs.filter((x) => names.includes(x.function.name));

export type ParsedArgs = { ok: true; args: Json } | { ok: false; error: string };

/** The model's argument string → an object, or an error the model is told. */
export function parseArgs(raw: string): ParsedArgs {
  let v: unknown;
  try {
    v = JSON.parse(raw.trim() || '{}');
  } catch (e) {
    return { ok: false, error: `arguments are not valid JSON: ${(e as Error).message}` };
  }
  if (!v || typeof v !== 'object' || Array.isArray(v))
    return { ok: false, error: 'arguments must be a JSON object' };
  return { ok: true, args: v as Json };
}

/** A built-in's arguments, checked with its zod schema. */
export function builtinArgs<S extends z.ZodType>(
  schema: S,
  args: Json,
): { ok: true; value: z.output<S> } | { ok: false; error: string } {
  const r = schema.safeParse(args);
  return r.success ? { ok: true, value: r.data } : { ok: false, error: formatIssues(r.error) };
}

/**
 * A declared tool's arguments: defaults fill what the model left out, the result is checked against
 * the visible JSON schema, then fixed arguments (hidden from the model) are injected.
 */
export function declaredArgs(
  t: Tool,
  modelArgs: Json,
): { ok: true; value: Json } | { ok: false; error: string } {
  const withDefaults = { ...(t.defaults ?? {}), ...modelArgs };
  for (const k of Object.keys(t.fixed ?? {})) delete withDefaults[k];
  let schema: z.ZodType;
  try {
    schema = z.fromJSONSchema(visibleParameters(t) as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (e) {
    return { ok: false, error: `the tool's parameter schema is unusable: ${(e as Error).message}` };
  }
  const r = schema.safeParse(withDefaults);
  if (!r.success) return { ok: false, error: formatIssues(r.error) };
  return { ok: true, value: { ...withDefaults, ...(t.fixed ?? {}) } };
}

/** `{{name}}` in each argv element → the argument (strings as is, anything else as JSON; missing → ''). */
export function renderArgv(template: string[], args: Json): string[] {
  return template.map((part) =>
    part.replace(/\{\{\s*([A-Za-z0-9_-]+)\s*\}\}/g, (_, name: string) => {
      const v = args[name];
      if (v === undefined || v === null) return '';
      return typeof v === 'string' ? v : JSON.stringify(v);
    }),
  );
}

/** Our id of the i-th tool call of the reply stored at step `seq`; `callIndex` reads i back (the per-reply cap). */
export const callId = (seq: number, i: number) => `call_${seq}_${i}`;
export const callIndex = (id: string) => Number(/_(\d+)$/.exec(id)?.[1] ?? 0);
