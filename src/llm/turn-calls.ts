import { endingToolNames } from '../api/agent.ts';
import { checkValues, resolvePaths } from './args.ts';
import { finalTools, mayEndWith, resultProblem } from './contract.ts';
import { checkAction, hashResult, recordAction, recordBlock, signature } from './loop-guard.ts';
import type { ToolCall } from './model.ts';
import { truncateBytes } from './prompt.ts';
import type { Ctl } from './state.ts';
import {
  ASK_QUESTION,
  AskArgs,
  builtinArgs,
  callIndex,
  declaredArgs,
  MARK_SUBTASK_COMPLETE,
  MarkArgs,
  MemoryArgs,
  parseArgs,
  renderArgv,
  SUBMIT_RESULT,
  SubmitArgs,
  UPDATE_MEMORY,
  WAIT,
  WaitArgs,
} from './tools.ts';
import { TurnBuiltins } from './turn-builtins.ts';
import { OUTPUT_ERRORS, Stale, type Tool } from './turn-core.ts';
import { isWorkTool, runWorkTool, WORK_TOOLS } from './work-tools.ts';
import {
  afterCommand,
  afterFileOp,
  FILE_TOOLS,
  type FileToolName,
  fileRequest,
  isFileTool,
} from './workspace-tools.ts';

/** One tool call of the model: checked, then run (a command, a file operation, an asynchronous request) or answered. */
export abstract class TurnCalls extends TurnBuiltins {
  /** One pending tool call → its result message (or an error the model is told), stored. */
  protected async handle(call: ToolCall): Promise<void> {
    const { d } = this;
    const name = call.function.name;
    const ctl = this.s.ctl;
    // An unusable call counts towards the bound on unusable outputs; a usable one resets it.
    const reply = (content: string, next: Ctl = ctl, extra: Record<string, unknown> = {}) => {
      const counted = OUTPUT_ERRORS.has(String(extra.outcome))
        ? this.outputError(next, content)
        : extra.outcome === 'blocked'
          ? next
          : { ...next, outputErrors: 0 };
      return this.record(
        'tool',
        [this.toolMsg(call, d.scrub.text(content))],
        counted,
        { tool: name, ...extra },
        [call.id],
      );
    };
    const ending = finalTools(d.settings.mustEndWith);
    if (ctl.llmSteps >= d.settings.maxSteps && !ending.includes(name))
      return reply(
        `error: only ${ending.join(' or ')} ${ending.length > 1 ? 'are' : 'is'} allowed on the last step`,
        ctl,
        {
          outcome: 'refused',
        },
      );
    const index = callIndex(call.id);
    if (index >= d.settings.maxToolCallsPerReply)
      return reply(
        `error: not run: at most ${d.settings.maxToolCallsPerReply} tool calls are run from one reply. Call it again in a later step if you still need it.`,
        ctl,
        { outcome: 'refused' },
      );
    if (name === SUBMIT_RESULT && !mayEndWith(SUBMIT_RESULT, d.settings.mustEndWith))
      return reply(
        `error: this turn ends only with ${endingToolNames(d.settings.mustEndWith).join(' or ')}, not ${SUBMIT_RESULT}`,
        ctl,
        { outcome: 'refused' },
      );
    const known = this.tools.declared.has(name) || this.tools.builtins.includes(name);
    if (!known)
      return reply(
        `error: unknown tool "${name}". Available: ${this.tools.specs.map((s) => s.function.name).join(', ')}`,
        ctl,
        { outcome: 'unknown_tool' },
      );
    const parsed = parseArgs(call.function.arguments);
    if (!parsed.ok)
      return reply(`error: ${parsed.error}. Call ${name} again with arguments matching its schema.`, ctl, {
        outcome: 'invalid_args',
      });
    const bad = (error: string) =>
      reply(
        `error: invalid arguments for ${name}: ${error}. Call it again with arguments matching its schema.`,
        ctl,
        {
          outcome: 'invalid_args',
        },
      );
    switch (name) {
      case SUBMIT_RESULT: {
        const a = builtinArgs(SubmitArgs, parsed.args);
        if (!a.ok) return bad(a.error);
        const problem = resultProblem(a.value.artefact_payload, this.fields);
        if (problem)
          return reply(
            `error: the result does not carry the declared fields: ${problem}. Call ${SUBMIT_RESULT} again with an artefact_payload that does.`,
            ctl,
            { outcome: 'invalid_result' },
          );
        return reply('submitted; the turn ends', { ...ctl, submitted: a.value }, { outcome: 'submitted' });
      }
      case ASK_QUESTION: {
        const a = builtinArgs(AskArgs, parsed.args);
        if (!a.ok) return bad(a.error);
        return this.ask(call, a.value.question, a.value.deadline_seconds);
      }
      case WAIT: {
        const a = builtinArgs(WaitArgs, parsed.args);
        if (!a.ok || !d.life) return bad(a.ok ? 'wait is for living agents only' : a.error);
        const text = await d.life.wait(a.value);
        if (text === undefined) throw new Stale('fence lost');
        if (text.startsWith('error:')) return reply(text, ctl, { outcome: 'work_error' });
        return reply(text, { ...ctl, endedBy: { tool: WAIT, output: text } }, { outcome: 'ok' });
      }
      case MARK_SUBTASK_COMPLETE: {
        const a = builtinArgs(MarkArgs, parsed.args);
        if (!a.ok) return bad(a.error);
        return this.mark(call, a.value.success, a.value.reason);
      }
      case UPDATE_MEMORY: {
        const a = builtinArgs(MemoryArgs, parsed.args);
        if (!a.ok) return bad(a.error);
        const content = truncateBytes(d.scrub.text(a.value.content), d.settings.workingMemoryBytes);
        if (!(await d.memory.setMemory(d.fence, d.role, content))) throw new Stale('fence lost');
        return reply(`working memory saved (${Buffer.byteLength(content)} bytes)`, ctl, { outcome: 'ok' });
      }
    }
    if (isWorkTool(name) && d.work) {
      const a = builtinArgs(WORK_TOOLS[name].schema, parsed.args);
      if (!a.ok) return bad(a.error);
      // The text the model wrote with this call (a completion's report when it passes none).
      const spoken = this.s.messages.findLast(
        (m) => m.role === 'assistant' && m.tool_calls?.some((c) => c.id === call.id),
      );
      const r = await runWorkTool(d.work, d.fence, d.role, name, a.value, spoken?.content ?? '');
      if (r.stale) throw new Stale('fence lost');
      return reply(r.text, ctl, { outcome: r.text.startsWith('error:') ? 'work_error' : 'ok' });
    }
    if (isFileTool(name)) {
      const a = builtinArgs(FILE_TOOLS[name].schema, parsed.args);
      if (!a.ok) return bad(a.error);
      const fault = checkValues({ path: a.value.path }, 4096);
      if (fault) return bad(fault);
      return this.fileTool(call, name, a.value);
    }
    const tool = this.tools.declared.get(name)!;
    // The model's strings go into a command line: no control characters, nothing huge, paths confined.
    const fault = checkValues(parsed.args, tool.maxArgumentBytes);
    if (fault) return bad(fault);
    const a = declaredArgs(tool, parsed.args);
    if (!a.ok) return bad(a.error);
    const p = await resolvePaths(tool.parameters, a.value, d.workspace);
    if (!p.ok) return bad(p.error);
    const sig = signature(name, p.value);
    const v = checkAction(ctl.loop, sig);
    if (!v.ok) {
      d.log.warn({ event_type: 'loop_blocked', tool: name, rule: v.rule, reason: v.reason });
      const block = { tool: name, rule: v.rule, reason: v.reason, llmStep: ctl.llmSteps };
      return reply(
        `BLOCKED by the loop guard: ${v.reason}. This call was not run. Try a different approach.`,
        { ...ctl, loop: recordBlock(ctl.loop, sig), blocks: [...ctl.blocks, block] },
        { outcome: 'blocked', block },
      );
    }
    if (tool.async) return this.request(call, tool, p.value);
    return this.runTool(call, tool, p.value, sig);
  }
  /** An asynchronous tool: its request out (after its wait row), the turn suspends until it answers. */
  protected async request(call: ToolCall, tool: Tool, args: Record<string, unknown>): Promise<void> {
    const { d } = this;
    const ctl = this.s.ctl;
    if (!d.life)
      return this.record(
        'tool',
        [
          this.toolMsg(
            call,
            `error: ${tool.name} is asynchronous; only a living agent's turns can wait for it`,
          ),
        ],
        this.outputError(ctl, 'async tool outside a life turn'),
        { tool: tool.name, outcome: 'refused' },
        [call.id],
      );
    const sent = await d.life.request(call.id, tool, args);
    if (!sent) throw new Stale('fence lost');
    d.log.info({
      event_type: 'tool_requested',
      tool: tool.name,
      tool_call_id: call.id,
      deadline_ms: sent.deadlineMs,
    });
    await this.record(
      'tool_wait',
      [],
      {
        ...ctl,
        outputErrors: 0,
        toolWaits: [...ctl.toolWaits, { toolCallId: call.id, tool: tool.name, deadlineMs: sent.deadlineMs }],
      },
      { tool: tool.name, outcome: 'requested', deadline_ms: sent.deadlineMs },
      [call.id],
    );
  }
  /**
   * The asynchronous calls the turn waits for: each received result becomes the call's tool message,
   * each call past its deadline a timeout report (never silence). Returns when to look again while
   * some are still out, or undefined once a step was recorded.
   */
  protected async collect(): Promise<number | undefined> {
    const { d } = this;
    const ctl = this.s.ctl;
    const rows = new Map((await d.steps.toolWaits(d.fence.turnId)).map((r) => [r.toolCallId, r]));
    const now = Date.now();
    for (const w of ctl.toolWaits) {
      const r = rows.get(w.toolCallId);
      const got = r?.status === 'received';
      if (!got && now < w.deadlineMs) continue;
      const content = got
        ? d.scrub.text(d.life ? d.life.showResult(w.tool, r.result) : JSON.stringify(r.result))
        : `error: ${w.tool} gave no result within its deadline (${new Date(w.deadlineMs).toISOString()}): this is a timeout report, not an answer. Go on without it, or call ${w.tool} again.`;
      if (!(await d.steps.settleTool(d.fence, w.toolCallId, got ? 'applied' : 'expired')))
        throw new Stale('fence lost');
      await this.record(
        'tool',
        [{ role: 'tool', tool_call_id: w.toolCallId, content }],
        { ...ctl, toolWaits: ctl.toolWaits.filter((x) => x.toolCallId !== w.toolCallId) },
        { tool: w.tool, outcome: got ? 'ok' : 'timed_out' },
        [w.toolCallId],
      );
      return undefined;
    }
    return Math.min(...ctl.toolWaits.map((w) => w.deadlineMs));
  }
  protected async runTool(
    call: ToolCall,
    tool: Tool,
    args: Record<string, unknown>,
    sig: string,
  ): Promise<void> {
    const { d } = this;
    const ctl = this.s.ctl;
    d.events.step({ ...this.base(), phase: 'executing', claim_id: d.claim.id, role: d.role });
    const run = await d.runner.run(
      {
        argv: renderArgv(tool.argv ?? [], args), // argv is required unless async: nats (handled above)
        cwd: d.workspace,
        stdin: '',
        timeoutMs: tool.timeoutSeconds * 1000,
        maxBytes: 1024 * 1024,
        env: tool.env,
        // The same on a resumed turn's replay of this call.
        callId: `${d.fence.turnId}:${call.id}`,
      },
      d.signal,
    );
    if (d.signal.aborted) return; // not stored: the call runs again on resume
    const status = run.spawnError
      ? `failed to start: ${run.spawnError}`
      : run.timedOut
        ? `timed out after ${tool.timeoutSeconds}s`
        : `exit code ${run.exitCode ?? run.signal}`;
    const limit = d.settings.toolResultChars;
    const cut = (s: string) => (s.length > limit ? `${s.slice(0, limit)}…[truncated]` : s);
    let content = d.scrub.text(
      `${status}\nstdout:\n${cut(run.stdout)}${run.stderr ? `\nstderr:\n${cut(run.stderr)}` : ''}`,
    );
    const end = tool.terminate ? this.termination(tool.name, run) : undefined;
    if (end) content += `\n${end.note}`;
    const r = recordAction(ctl.loop, sig, hashResult(content));
    const next: Ctl = {
      ...ctl,
      loop: r.state,
      outputErrors: 0,
      probe: afterCommand(
        ctl.probe,
        tool.name,
        status,
        run.exitCode === 0 && !run.timedOut && !run.spawnError,
      ),
      ...(end?.endedBy ? { endedBy: end.endedBy } : {}),
    };
    const extra: Record<string, unknown> = {
      outcome: 'ok',
      exit_code: run.exitCode,
      duration_ms: Math.round(run.durationMs),
    };
    if (!r.verdict.ok) {
      const block = {
        tool: tool.name,
        rule: r.verdict.rule,
        reason: r.verdict.reason,
        llmStep: ctl.llmSteps,
      };
      next.blocks = [...ctl.blocks, block];
      extra.block = block;
      content += `\n[loop guard] ${r.verdict.reason}; this call is blocked from now on. Use what you learned.`;
      d.log.warn({
        event_type: 'loop_blocked',
        tool: tool.name,
        rule: r.verdict.rule,
        reason: r.verdict.reason,
      });
    }
    await this.record('tool', [this.toolMsg(call, content)], next, { tool: tool.name, ...extra }, [call.id]);
  }
  /**
   * A built-in file tool: the operation runs where the tools run (the runner checks the path there),
   * under the loop guard like any tool; what it wrote feeds the state probe.
   */
  protected async fileTool(call: ToolCall, name: FileToolName, args: Record<string, unknown>): Promise<void> {
    const { d } = this;
    const ctl = this.s.ctl;
    const sig = signature(name, args);
    const v = checkAction(ctl.loop, sig);
    if (!v.ok) {
      const block = { tool: name, rule: v.rule, reason: v.reason, llmStep: ctl.llmSteps };
      return this.record(
        'tool',
        [
          this.toolMsg(
            call,
            `BLOCKED by the loop guard: ${v.reason}. This call was not run. Try a different approach.`,
          ),
        ],
        { ...ctl, loop: recordBlock(ctl.loop, sig), blocks: [...ctl.blocks, block] },
        { tool: name, outcome: 'blocked', block },
        [call.id],
      );
    }
    const r = await d.runner.file(fileRequest(name, args, d.workspace, d.settings.fileToolsAllowGit));
    const limit = d.settings.toolResultChars;
    const text = r.ok ? r.output : `error: ${r.error}`;
    const content = d.scrub.text(text.length > limit ? `${text.slice(0, limit)}…[truncated]` : text);
    const next: Ctl = {
      ...ctl,
      loop: recordAction(ctl.loop, sig, hashResult(content)).state,
      outputErrors: 0,
      probe: afterFileOp(ctl.probe, name, String(args.path ?? '.'), r),
    };
    await this.record(
      'tool',
      [this.toolMsg(call, content)],
      next,
      { tool: name, outcome: r.ok ? 'ok' : 'file_error' },
      [call.id],
    );
  }
}
