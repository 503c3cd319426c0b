import { GEN_AI, inSpan } from '../../telemetry/spans.ts';
import type { ToolCall } from '../model/model.ts';
import { checkValues, resolvePaths } from '../tools/args.ts';
import { isMemoryTool } from '../tools/memory-tools.ts';
import { declaredArgs } from '../tools/tools.ts';
import { isWorkTool } from '../tools/work-tools.ts';
import { isFileTool } from '../tools/workspace-tools.ts';
import { awaitApproval, refusal } from './approval.ts';
import { request } from './async-calls.ts';
import {
  BUILTIN_HANDLERS,
  type CallContext,
  fileCall,
  isCoreBuiltin,
  memoryCall,
  type Reply,
  workCall,
} from './builtins.ts';
import { checkAction, recordBlock, signature } from './loop-guard.ts';
import { mcpCall } from './mcp-calls.ts';
import { screenCall } from './refusal.ts';
import { OUTPUT_ERRORS, type TurnScope } from './scope.ts';
import type { Ctl } from './state.ts';
import { runTool } from './tool-run.ts';

/** One pending tool call → its result message (or an error the model is told), stored; in its `execute_tool` span. */
export function handle(t: TurnScope, call: ToolCall): Promise<void> {
  const name = call.function.name;
  const extension =
    !!t.deps.mcp &&
    !t.tools.declared.has(name) &&
    !isCoreBuiltin(name) &&
    !isFileTool(name) &&
    !isWorkTool(name) &&
    !isMemoryTool(name);
  return inSpan(
    `execute_tool ${name}`,
    {
      attributes: {
        [GEN_AI.operation]: 'execute_tool',
        [GEN_AI.toolName]: name,
        [GEN_AI.toolCallId]: call.id,
        [GEN_AI.toolType]: extension ? 'extension' : 'function',
      },
    },
    () => handleCall(t, call),
  );
}

async function handleCall(t: TurnScope, call: ToolCall): Promise<void> {
  const { deps } = t;
  const name = call.function.name;
  const ctl = t.state.ctl;
  // An unusable call counts towards the bound on unusable outputs; a usable one resets it.
  const reply: Reply = (content, next = ctl, extra = {}) => {
    const counted: Ctl = OUTPUT_ERRORS.has(String(extra.outcome))
      ? t.outputError(next, content)
      : extra.outcome === 'blocked'
        ? next
        : { ...next, outputErrors: 0 };
    return t.record('tool', [t.toolMsg(call, deps.scrub.text(content))], counted, { tool: name, ...extra }, [
      call.id,
    ]);
  };
  const screened = screenCall(call, {
    llmSteps: ctl.llmSteps,
    settings: deps.settings,
    offered: t.tools.specs.map((s) => s.function.name),
  });
  if (!screened.ok) return reply(screened.content, ctl, { outcome: screened.outcome });
  const bad = (error: string) =>
    reply(
      `error: invalid arguments for ${name}: ${error}. Call it again with arguments matching its schema.`,
      ctl,
      { outcome: 'invalid_args' },
    );
  const x: CallContext = { t, call, args: screened.args, reply, bad };
  if (isCoreBuiltin(name)) return BUILTIN_HANDLERS[name](x);
  if (isWorkTool(name) && deps.work) return workCall(x, name);
  if (isMemoryTool(name) && deps.longMemory) return memoryCall(x, name);
  if (isFileTool(name)) return fileCall(x, name);
  if (deps.mcp && !t.tools.declared.has(name)) return mcpCall(x, deps.mcp);
  return declaredCall(x);
}

/** A tool the agent declared: its arguments checked and confined, the loop guard asked, then run. */
async function declaredCall({ t, call, args, reply, bad }: CallContext): Promise<void> {
  const { deps } = t;
  const ctl = t.state.ctl;
  const name = call.function.name;
  const tool = t.tools.declared.get(name)!;
  // The model's strings go into a command line: no control characters, nothing huge, paths confined.
  const fault = checkValues(args, tool.maxArgumentBytes);
  if (fault) return bad(fault);
  const a = declaredArgs(tool, args);
  if (!a.ok) return bad(a.error);
  const p = await resolvePaths(tool.parameters, a.value, deps.workspace);
  if (!p.ok) return bad(p.error);
  const sig = signature(name, p.value);
  const v = checkAction(ctl.loop, sig);
  if (!v.ok) {
    deps.log.warn({ event_type: 'loop_blocked', tool: name, rule: v.rule, reason: v.reason });
    const block = { tool: name, rule: v.rule, reason: v.reason, llmStep: ctl.llmSteps };
    return reply(
      `BLOCKED by the loop guard: ${v.reason}. This call was not run. Try a different approach.`,
      { ...ctl, loop: recordBlock(ctl.loop, sig), blocks: [...ctl.blocks, block] },
      { outcome: 'blocked', block },
    );
  }
  if (tool.requireApproval) {
    // What the person approves: the arguments as the tool gets them, less the hidden fixed ones.
    const shown = Object.fromEntries(
      Object.entries(a.value).filter(([k]) => !Object.hasOwn(tool.fixed ?? {}, k)),
    );
    const ok = await awaitApproval(t, call, { tool: name, args: shown });
    if (ok === 'waiting') return;
    if (ok !== 'approved') return reply(refusal(name, ok.rejected), ctl, { outcome: 'rejected' });
  }
  if (tool.async) return request(t, call, tool, p.value);
  return runTool(t, call, tool, p.value, sig);
}
