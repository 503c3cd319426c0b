import { v5 as uuidv5 } from 'uuid';
import type { z } from 'zod';
import { type AgentTool, endingToolNames } from '../api/agent.ts';
import { childrenOf } from '../blackboard/claim-engine.ts';
import type { Blackboard } from '../blackboard/client.ts';
import type { ErrorClass } from '../blackboard/error-class.ts';
import { isRework } from '../blackboard/results.ts';
import type { Artefact, Claim, ClaimType } from '../blackboard/types.ts';
import type { AgentEvents } from '../bus/events.ts';
import type { Logger } from '../common/logger.ts';
import type { Scrubber } from '../common/secrets.ts';
import type { Fence } from '../inbox/schema.ts';
import type { StepStore } from '../inbox/steps.ts';
import type { ToolRunner } from '../pup/runner/runner.ts';
import type { WorkStore } from '../work/store.ts';
import { type LlmAgent, PausedError } from './agent.ts';
import { checkValues, resolvePaths } from './args.ts';
import { compacted, compactionCut, summaryMessage, summaryRequest } from './compaction.ts';
import type { LlmSettings } from './config.ts';
import { describeFields, finalTools, mayEndWith, type ResultFields, resultProblem } from './contract.ts';
import { classOf } from './errors.ts';
import { checkAction, clearBlocks, hashResult, recordAction, recordBlock, signature } from './loop-guard.ts';
import type { MemoryStore } from './memory-store.ts';
import type { ChatMessage, ToolCall } from './model.ts';
import {
  activeLeaf,
  Decomposition,
  decompose,
  markSubtask,
  planFrom,
  renderPlan,
  SubDecomposition,
  trivialPlan,
} from './plan.ts';
import type { PlanStore } from './plan-store.ts';
import { nextStep, onNoToolCalls, timeBoxExceeded } from './policy.ts';
import { extractJson, planMessages, subPlanMessages, truncateBytes, turnMessages } from './prompt.ts';
import { type Ctl, foldSteps, pendingToolCalls, type TurnState, transcriptSummary } from './state.ts';
import type { TurnStore } from './store.ts';
import {
  ASK_QUESTION,
  AskArgs,
  buildToolSet,
  builtinArgs,
  callId,
  callIndex,
  declaredArgs,
  MARK_SUBTASK_COMPLETE,
  MarkArgs,
  MemoryArgs,
  parseArgs,
  renderArgv,
  SUBMIT_RESULT,
  SubmitArgs,
  specsNamed,
  type ToolSet,
  UPDATE_MEMORY,
  WAIT,
  WaitArgs,
} from './tools.ts';
import { isWorkTool, runWorkTool, WORK_TOOLS } from './work-tools.ts';
import {
  afterCommand,
  afterFileOp,
  FILE_TOOLS,
  type FileToolName,
  fileRequest,
  isFileTool,
  probeMessage,
} from './workspace-tools.ts';

type Tool = z.output<typeof AgentTool>;

export type TurnEnd =
  | { kind: 'result'; result: { type: string; payload: string; summary: string; structural_type?: string } }
  | { kind: 'failure'; reason: string; transcript: string; errorClass: ErrorClass }
  | { kind: 'waiting'; questionId: string }
  /** Asynchronous tool calls are out: resume when their results are in or `untilMs` passes. */
  | { kind: 'suspended'; untilMs: number }
  | { kind: 'stale' }
  | { kind: 'aborted' };

/**
 * What a life turn (src/life) brings instead of a claim: its opening (what woke the agent, wrapped in
 * provenance labels), the wait tool that ends it, and the requests of asynchronous tools.
 */
export interface LifeHooks {
  opening(): Promise<{ messages: ChatMessage[]; goalId: string; goalAtMs: number }>;
  /** Stores the model's wait; undefined when the fence is lost. The turn ends after it. */
  wait(a: WaitArgs): Promise<string | undefined>;
  /** Sends an asynchronous tool's request (its wait row stored first); undefined when the fence is lost. */
  request(
    callId: string,
    tool: Tool,
    args: Record<string, unknown>,
  ): Promise<{ deadlineMs: number } | undefined>;
  /** How an asynchronous tool's result is shown to the model (wrapped in its labels). */
  showResult(tool: string, result: unknown): string;
}

export interface TurnDeps {
  agent: LlmAgent;
  store: TurnStore;
  steps: StepStore;
  memory: MemoryStore;
  /** A planning agent's plans per goal; without it a plan lives in its turn alone. */
  plans?: PlanStore;
  /** The agent's work items, when it has the work tools (src/work). */
  work?: WorkStore;
  bb: Blackboard;
  settings: LlmSettings;
  instance: string;
  role: string;
  systemPrompt?: string;
  workspace: string;
  fence: Fence;
  claim: Claim;
  claimType: ClaimType;
  target: Artefact;
  /** Assembled only for a fresh turn (a resumed one has its prompt stored). */
  context: () => Promise<Artefact[]>;
  scrub: Scrubber;
  /** Where declared tools run (never with the pup's credentials). */
  runner: ToolRunner;
  events: AgentEvents;
  log: Logger;
  signal: AbortSignal;
  /** A life turn's hooks; absent for a claim's turn. */
  life?: LifeHooks;
}

/** The fence was lost: another process owns the turn now, so this one writes nothing more. */
export class Stale extends Error {}

const QUESTION_NS = 'c1d0f5a4-3b2e-4f6a-9d8c-7e6b5a4f3c2d';

/**
 * One turn of the agent loop: a state machine over the stored steps. Each pass looks at the folded
 * state, does one thing (a model call, one tool call, a plan change), and stores it as a step before
 * the next pass; so a turn killed anywhere resumes from its last stored step and never re-runs a tool
 * call whose result is stored.
 */
/** Outcomes of a tool call that mean the model's output could not be used. */
const OUTPUT_ERRORS = new Set(['invalid_args', 'unknown_tool', 'invalid_result', 'refused']);

export class Turn {
  private readonly d: TurnDeps;
  private readonly tools: ToolSet;
  /** The fields its result must carry (none for a review, whose payload is a verdict). */
  private readonly fields: ResultFields | undefined;
  private s: TurnState = { messages: [], ctl: {} as Ctl, nextSeq: 0 };
  private chunkSeq = 0;
  constructor(d: TurnDeps) {
    this.d = d;
    const st = d.settings;
    this.fields = d.claimType === 'review' ? undefined : st.resultFields;
    this.tools = buildToolSet(st.tools, {
      allowed: st.allowedTools,
      planning: st.planning,
      memory: st.workingMemoryBytes > 0,
      files: st.fileTools,
      work: st.workItems && d.work !== undefined,
      life: d.life !== undefined,
      submit: mayEndWith(SUBMIT_RESULT, st.mustEndWith),
      resultFields: describeFields(this.fields),
    });
  }

  async run(): Promise<TurnEnd> {
    try {
      return await this.loop();
    } catch (e) {
      if (e instanceof Stale) return { kind: 'stale' };
      throw e;
    }
  }

  private base() {
    const f = this.d.fence;
    return { actor_id: f.actorId, turn_id: f.turnId, turn_epoch: f.epoch, at_ms: Date.now() };
  }

  private async record(
    kind: string,
    messages: ChatMessage[],
    ctl: Ctl,
    extra: Record<string, unknown> = {},
    toolCallIds: string[] = [],
  ) {
    const metadata = this.d.scrub.json({ messages, ctl, ...extra });
    const ok = await this.d.steps.recordStep(this.d.fence, {
      seq: this.s.nextSeq,
      kind,
      status: extra.error ? 'failed' : 'completed',
      toolCallIds,
      metadata,
      error: typeof extra.error === 'string' ? extra.error : undefined,
    });
    if (!ok) throw new Stale('fence lost');
    // The plan outlives the turn: each change is saved for the goal, under the same fence.
    const plan = metadata.ctl.plan;
    const { plans } = this.d;
    if (plans && plan && metadata.ctl.goalId && JSON.stringify(plan) !== JSON.stringify(this.s.ctl.plan))
      if (!(await plans.save(this.d.fence, this.d.role, metadata.ctl.goalId, plan)))
        throw new Stale('fence lost');
    const compact = extra.compact as { head: number; from: number } | undefined;
    this.s = {
      messages: compact
        ? compacted(this.s.messages, compact, metadata.messages)
        : [...this.s.messages, ...metadata.messages],
      ctl: metadata.ctl,
      nextSeq: this.s.nextSeq + 1,
    };
  }

  private async loop(): Promise<TurnEnd> {
    const { d } = this;
    this.s = foldSteps(await d.steps.steps(d.fence.turnId));
    if (this.s.nextSeq > 0)
      d.log.info({ event_type: 'turn_resumed', from_seq: this.s.nextSeq, llm_steps: this.s.ctl.llmSteps });
    else await this.start();
    if (d.settings.planning && !this.s.ctl.planned) await this.plan();
    for (;;) {
      if (d.signal.aborted) return { kind: 'aborted' };
      const { ctl } = this.s;
      if (ctl.failed) return this.failure(ctl.failed.reason, ctl.failed.errorClass ?? 'transient');
      if (ctl.submitted)
        return {
          kind: 'result',
          result: {
            type: ctl.submitted.artefact_type,
            payload: ctl.submitted.artefact_payload,
            summary: ctl.submitted.summary,
            structural_type:
              ctl.submitted.structural_type ?? (d.claimType === 'review' ? 'Review' : undefined),
          },
        };
      if (ctl.endedBy)
        return {
          kind: 'result',
          result: {
            type: d.claimType === 'review' ? 'Review' : d.settings.resultType,
            payload: ctl.endedBy.output,
            summary: `ended by ${ctl.endedBy.tool}`,
          },
        };
      if (ctl.finalText !== undefined)
        return {
          kind: 'result',
          result: {
            type: d.claimType === 'review' ? 'Review' : d.settings.resultType,
            payload: ctl.finalText,
            summary: ctl.finalText.slice(0, 200),
          },
        };
      if (ctl.waiting) {
        if (await this.answer(ctl.waiting)) continue;
        const due = ctl.waiting.deadlineMs;
        if (due === undefined || Date.now() < due)
          return { kind: 'waiting', questionId: ctl.waiting.questionId };
        await this.unanswered(ctl.waiting);
        continue;
      }
      if (ctl.toolWaits.length) {
        const untilMs = await this.collect();
        if (untilMs !== undefined) return { kind: 'suspended', untilMs };
        continue;
      }
      const [call] = pendingToolCalls(this.s);
      if (call) {
        await this.handle(call);
        continue;
      }
      const over = timeBoxExceeded(
        { turnMs: ctl.startedAtMs, goalMs: ctl.goalAtMs },
        { turnMs: d.settings.turnTimeoutMs, goalMs: d.settings.goalTimeoutMs },
        Date.now(),
      );
      if (over) return this.failure(over, 'quota');
      const from = compactionCut(this.s.messages, ctl.headLength, d.settings.historyKeep);
      if (from !== undefined) {
        await this.compact(from);
        continue;
      }
      const ending = finalTools(d.settings.mustEndWith);
      const step = nextStep(ctl.llmSteps, d.settings.maxSteps, ending);
      if (step.kind === 'exhausted')
        return this.failure(
          `step budget exhausted: ${d.settings.maxSteps} steps without ${ending.join(' or ')}`,
          'quota',
        );
      await this.think(step.step, step.final, step.warning);
    }
  }

  private failure(reason: string, errorClass: ErrorClass): TurnEnd {
    return { kind: 'failure', reason, transcript: transcriptSummary(this.s.messages), errorClass };
  }

  /** Step 0: the prompt, built once (target, context oldest first, memory, failures). */
  private async start(): Promise<void> {
    const { d } = this;
    // A life turn opens with what woke the agent; a claim's turn with its target and context.
    const o = d.life ? { ...(await d.life.opening()), extra: {} } : await this.claimOpening();
    await this.record(
      'init',
      o.messages,
      {
        ...this.s.ctl,
        llmSteps: 0,
        headLength: o.messages.length,
        startedAtMs: Date.now(),
        goalAtMs: o.goalAtMs,
        goalId: o.goalId,
      },
      o.extra,
    );
    d.events.step({ ...this.base(), phase: 'started', claim_id: d.claim.id, role: d.role });
  }

  /** A claim's prompt (target, context oldest first, memory, failures) and its workflow's goal. */
  private async claimOpening(): Promise<{
    messages: ChatMessage[];
    goalId: string;
    goalAtMs: number;
    extra: Record<string, unknown>;
  }> {
    const { d } = this;
    const st = d.settings;
    const [context, memory, failures] = await Promise.all([
      d.context(),
      st.workingMemoryBytes > 0 ? d.memory.memory(d.instance, d.role) : undefined,
      d.store.recentFailures(d.instance, d.role),
    ]);
    const messages = turnMessages({
      role: d.role,
      system: d.systemPrompt,
      claimType: d.claimType,
      rework: isRework(d.claim),
      target: d.target,
      context,
      memory,
      memoryBytes: st.workingMemoryBytes,
      failures,
      mustEndWith: st.mustEndWith,
      resultFields: describeFields(this.fields),
      maxSteps: st.maxSteps,
    });
    // The workflow's goal, as far as the turn sees: the oldest of its target and context.
    const goal = [d.target, ...context].reduce((a, b) => (b.created_at_ms < a.created_at_ms ? b : a));
    return {
      messages,
      goalId: goal.id,
      goalAtMs: goal.created_at_ms,
      extra: { context_size: context.length },
    };
  }

  /** Planning agents decompose the goal first (structured output); a bad plan falls back to one task. */
  private async plan(): Promise<void> {
    const { d } = this;
    d.events.step({ ...this.base(), phase: 'planning', claim_id: d.claim.id, role: d.role });
    const goal = d.target.payload.slice(0, 500) || d.target.type;
    // A plan an earlier turn made for this goal, with work left in it, is carried on.
    const stored =
      d.plans && this.s.ctl.goalId ? await d.plans.load(d.instance, d.role, this.s.ctl.goalId) : undefined;
    if (stored && activeLeaf(stored)) {
      const note: ChatMessage = {
        role: 'user',
        content: `Your plan for this goal, carried on from earlier turns (work on the subtask marked →; call ${MARK_SUBTASK_COMPLETE} when it is done or has failed):\n${renderPlan(stored)}`,
      };
      await this.record(
        'plan',
        [note],
        { ...this.s.ctl, planned: true, plan: stored, headLength: this.s.ctl.headLength + 1 },
        { plan_source: 'goal' },
      );
      return;
    }
    let plan = trivialPlan(goal);
    const extra: Record<string, unknown> = {};
    try {
      const r = await d.agent.call(
        'plan',
        d.fence.turnId,
        { messages: planMessages(this.s.messages), json: true },
        { signal: d.signal },
      );
      const parsed = Decomposition.safeParse(extractJson(r.content));
      if (parsed.success) plan = planFrom(goal, parsed.data);
      else extra.plan_error = `decomposition unusable: ${parsed.error.issues[0]?.message}`;
      extra.llm_usage = r.usage;
      extra.llm_response_cost = r.costUsd;
    } catch (e) {
      if (e instanceof PausedError) {
        await this.record(
          'plan',
          [],
          { ...this.s.ctl, planned: true, failed: { reason: e.message, errorClass: e.errorClass } },
          { error: e.message },
        );
        return;
      }
      extra.plan_error = e instanceof Error ? e.message : String(e);
    }
    if (extra.plan_error) d.log.warn({ event_type: 'plan_fallback', reason: extra.plan_error });
    const note: ChatMessage = {
      role: 'user',
      content: `Your plan (work on the subtask marked →; call ${MARK_SUBTASK_COMPLETE} when it is done or has failed):\n${renderPlan(plan)}`,
    };
    await this.record(
      'plan',
      [note],
      { ...this.s.ctl, planned: true, plan, headLength: this.s.ctl.headLength + 1 },
      extra,
    );
  }

  /** One model call (a ReAct step), stored with its usage and cost before anything acts on it. */
  private async think(step: number, final: boolean, warning?: string): Promise<void> {
    const { d } = this;
    const probe = d.settings.stateProbe ? await this.probe() : undefined;
    const pre: ChatMessage[] = [
      ...(probe ? [{ role: 'user' as const, content: probe }] : []),
      ...(warning ? [{ role: 'user' as const, content: warning }] : []),
    ];
    const tools = final ? specsNamed(this.tools, finalTools(d.settings.mustEndWith)) : this.tools.specs;
    let reply: Awaited<ReturnType<LlmAgent['call']>>;
    try {
      reply = await d.agent.call(
        'turn',
        d.fence.turnId,
        { messages: [...this.s.messages, ...pre], tools, stream: d.settings.stream },
        {
          signal: d.signal,
          onChunk: (text) =>
            d.events.chunk({ ...this.base(), seq: this.chunkSeq++, text: d.scrub.text(text) }),
        },
      );
    } catch (e) {
      if (d.signal.aborted) return;
      const reason = e instanceof Error ? e.message : String(e);
      const failed = { reason, errorClass: classOf(e) };
      await this.record(
        'llm',
        [],
        { ...this.s.ctl, failed },
        { error: reason, step, error_class: failed.errorClass },
      );
      return;
    }
    // Our own ids: unique in the turn whatever the server sends, so "has a result" is exact on resume.
    const calls: ToolCall[] = reply.toolCalls.map((c, i) => ({ ...c, id: callId(this.s.nextSeq, i) }));
    const assistant: ChatMessage = {
      role: 'assistant',
      content: reply.content,
      ...(calls.length ? { tool_calls: calls } : {}),
    };
    let ctl: Ctl = { ...this.s.ctl, llmSteps: this.s.ctl.llmSteps + 1 };
    const post: ChatMessage[] = [];
    if (!calls.length) {
      const n = onNoToolCalls(d.settings.mustEndWith, reply.content, this.fields);
      if (n.kind === 'end') ctl.finalText = n.text;
      else {
        post.push({ role: 'user', content: n.message });
        ctl = this.outputError(ctl, n.message);
      }
    }
    await this.record(
      'llm',
      [...pre, assistant, ...post],
      ctl,
      {
        step,
        llm_usage: reply.usage,
        llm_response_cost: reply.costUsd,
        finish_reason: reply.finishReason,
        model: d.settings.model,
      },
      calls.map((c) => c.id),
    );
    d.events.step({
      ...this.base(),
      phase: 'replied',
      claim_id: d.claim.id,
      role: d.role,
      usage: { prompt_tokens: reply.usage.promptTokens, completion_tokens: reply.usage.completionTokens },
    });
  }

  private toolMsg = (call: ToolCall, content: string): ChatMessage => ({
    role: 'tool',
    tool_call_id: call.id,
    content,
  });

  /** One pending tool call → its result message (or an error the model is told), stored. */
  private async handle(call: ToolCall): Promise<void> {
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
  private async request(call: ToolCall, tool: Tool, args: Record<string, unknown>): Promise<void> {
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
  private async collect(): Promise<number | undefined> {
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

  private async runTool(
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
  private async fileTool(call: ToolCall, name: FileToolName, args: Record<string, unknown>): Promise<void> {
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

  /** The state probe's message: what the turn wrote, whether it is still there, the last commands and errors. */
  private async probe(): Promise<string | undefined> {
    const p = this.s.ctl.probe;
    if (!p.written.length && !p.commands.length && !p.errors.length) return undefined;
    const r = p.written.length
      ? await this.d.runner
          .file({ op: 'exists', root: this.d.workspace, paths: p.written })
          .catch(() => undefined)
      : undefined;
    return probeMessage(p, r?.ok ? (r.exists ?? []) : []);
  }

  /**
   * Compaction: the exchanges in [head, from) become one summary, written by the model (or, when that
   * call fails, the turn's own account of them), stored as a step so a resume folds to the same messages.
   */
  private async compact(from: number): Promise<void> {
    const { d } = this;
    const head = this.s.ctl.headLength;
    const older = this.s.messages.slice(head, from);
    const extra: Record<string, unknown> = { compact: { head, from }, compacted_messages: older.length };
    let summary: string;
    try {
      const r = await d.agent.call(
        'turn',
        d.fence.turnId,
        { messages: summaryRequest(this.s.messages.slice(0, head), older) },
        { signal: d.signal },
      );
      summary = r.content;
      extra.llm_usage = r.usage;
      extra.llm_response_cost = r.costUsd;
    } catch (e) {
      if (d.signal.aborted) return;
      // Compaction is an economy, never a reason to fail the turn: the account is shorter than the steps.
      summary = transcriptSummary(older, 3000);
      extra.summary_error = e instanceof Error ? e.message : String(e);
      d.log.warn({ event_type: 'compaction_fallback', error: extra.summary_error });
    }
    await this.record('compact', [summaryMessage(summary)], this.s.ctl, extra);
  }

  /** One more unusable output in a row; at the bound the turn fails (class model_output). */
  private outputError(ctl: Ctl, what: string): Ctl {
    const n = ctl.outputErrors + 1;
    if (n < this.d.settings.maxOutputErrors) return { ...ctl, outputErrors: n };
    const reason = `the model's output was unusable ${n} times in a row (last: ${what.slice(0, 300)})`;
    return { ...ctl, outputErrors: n, failed: { reason, errorClass: 'model_output' } };
  }

  /**
   * A `terminate` tool has run: whether it ends the turn (it succeeded, the turn may end with it, and
   * its output carries the declared fields), and what the model is told either way.
   */
  private termination(
    name: string,
    run: {
      exitCode: number | null;
      timedOut: boolean;
      overflow: boolean;
      spawnError?: string;
      stdout: string;
    },
  ): { note: string; endedBy?: { tool: string; output: string } } {
    const { d } = this;
    if (!mayEndWith(name, d.settings.mustEndWith))
      return {
        note: `[the turn goes on: it ends only with ${endingToolNames(d.settings.mustEndWith).join(' or ')}]`,
      };
    if (run.exitCode !== 0 || run.timedOut || run.overflow || run.spawnError)
      return { note: `[the turn goes on: ${name} did not succeed, so it did not end the turn]` };
    const output = d.scrub.text(run.stdout.trim());
    const problem = resultProblem(output, this.fields);
    if (problem) return { note: `[the turn goes on: this output cannot be the result: ${problem}]` };
    return { note: '[this output is the result; the turn ends]', endedBy: { tool: name, output } };
  }

  /** ask_question: the Question artefact first (idempotent id), then the waiting state; the turn suspends. */
  private async ask(call: ToolCall, question: string, deadlineSeconds?: number): Promise<void> {
    const { d } = this;
    const id = uuidv5(`${d.fence.turnId}/${call.id}`, QUESTION_NS);
    await d.bb.createArtefact({
      id,
      logical_id: id,
      version: 1,
      structural_type: 'Question',
      type: 'Question',
      payload: d.scrub.text(question),
      source_artefacts: [d.target.id],
      produced_by_role: d.role,
    });
    d.log.info({ event_type: 'question_asked', question_id: id });
    await this.record(
      'question',
      [],
      {
        ...this.s.ctl,
        waiting: {
          toolCallId: call.id,
          questionId: id,
          ...(deadlineSeconds ? { deadlineMs: Date.now() + deadlineSeconds * 1000 } : {}),
        },
      },
      { question_id: id, tool: ASK_QUESTION },
      [call.id],
    );
  }

  /** An Answer citing the question resumes the turn: it becomes ask_question's result. */
  private async answer(w: { toolCallId: string; questionId: string }): Promise<boolean> {
    const { d } = this;
    const kids = await d.bb.getArtefacts(await childrenOf(d.bb, w.questionId));
    const a = kids
      .filter((x): x is Artefact => x?.structural_type === 'Answer')
      .sort((x, y) => x.created_at_ms - y.created_at_ms)[0];
    if (!a) return false;
    d.log.info({ event_type: 'question_answered', question_id: w.questionId, answer_id: a.id });
    const msg: ChatMessage = {
      role: 'tool',
      tool_call_id: w.toolCallId,
      content: d.scrub.text(JSON.stringify({ answer: a.payload, answered_by: a.produced_by_role })),
    };
    await this.record('answer', [msg], { ...this.s.ctl, waiting: undefined }, { answer_id: a.id }, [
      w.toolCallId,
    ]);
    return true;
  }

  /** A question past its deadline: the model gets a timeout report and goes on (the Question stays). */
  private async unanswered(w: {
    toolCallId: string;
    questionId: string;
    deadlineMs?: number;
  }): Promise<void> {
    const { d } = this;
    d.log.info({ event_type: 'question_timed_out', question_id: w.questionId });
    const msg: ChatMessage = {
      role: 'tool',
      tool_call_id: w.toolCallId,
      content: `error: no answer to question ${w.questionId} by its deadline (${new Date(w.deadlineMs ?? 0).toISOString()}): this is a timeout report, not an answer. Decide without it.`,
    };
    await this.record(
      'answer',
      [msg],
      { ...this.s.ctl, waiting: undefined },
      { question_id: w.questionId, timed_out: true },
      [w.toolCallId],
    );
  }

  /** mark_subtask_complete: advance, retry, or escalate (decompose further, then give up). */
  private async mark(call: ToolCall, success: boolean, reason: string): Promise<void> {
    const { d } = this;
    const ctl = this.s.ctl;
    const msg = (content: string, next: Ctl, extra: Record<string, unknown> = {}) =>
      this.record('subtask', [this.toolMsg(call, content)], next, { tool: MARK_SUBTASK_COMPLETE, ...extra }, [
        call.id,
      ]);
    if (!ctl.plan) return msg('error: there is no plan in this turn', ctl);
    const { plan, effect } = markSubtask(ctl.plan, success, reason || (success ? 'done' : 'failed'));
    const next: Ctl = { ...ctl, plan };
    switch (effect.kind) {
      case 'no_active':
      case 'complete':
        return msg(
          `All subtasks are complete. Call ${SUBMIT_RESULT} now.`,
          { ...next, loop: clearBlocks(ctl.loop) },
          { effect: 'complete' },
        );
      case 'advanced':
        return msg(
          `Subtask done. Next subtask: [${effect.next.id}] ${effect.next.description}\n${renderPlan(plan)}`,
          { ...next, loop: clearBlocks(ctl.loop) },
          { effect: 'advanced' },
        );
      case 'retry':
        return msg(
          `Subtask [${effect.node.id}] failed (${effect.node.failures} time). Try it again another way.`,
          next,
          { effect: 'retry' },
        );
      case 'give_up':
        return msg(
          `Subtask failed for good: ${effect.reason}`,
          { ...next, failed: { reason: `planning gave up: ${effect.reason}`, errorClass: 'model_output' } },
          { effect: 'give_up' },
        );
      case 'decompose': {
        let subtasks: string[] | undefined;
        const extra: Record<string, unknown> = { effect: 'decompose' };
        try {
          const r = await d.agent.call(
            'plan',
            d.fence.turnId,
            {
              messages: subPlanMessages(
                this.s.messages.slice(0, 2),
                effect.node.description,
                effect.node.reasons,
              ),
              json: true,
            },
            { signal: d.signal },
          );
          extra.llm_usage = r.usage;
          extra.llm_response_cost = r.costUsd;
          const p = SubDecomposition.safeParse(extractJson(r.content));
          if (p.success) subtasks = p.data.subtasks;
        } catch (e) {
          extra.plan_error = e instanceof Error ? e.message : String(e);
        }
        if (!subtasks)
          return msg(
            'Subtask failed twice and could not be broken down; giving up.',
            {
              ...next,
              failed: {
                reason: `planning gave up: subtask ${effect.node.id} failed twice and could not be decomposed`,
                errorClass: 'model_output',
              },
            },
            extra,
          );
        const p2 = decompose(plan, effect.node.id, subtasks);
        const leaf = activeLeaf(p2)?.node;
        return msg(
          `Subtask [${effect.node.id}] failed twice; it is now broken into smaller steps. Next: [${leaf?.id}] ${leaf?.description}\n${renderPlan(p2)}`,
          { ...next, plan: p2, loop: clearBlocks(ctl.loop) },
          extra,
        );
      }
    }
  }
}
