import { isRework } from '../../blackboard/results.ts';
import { errorMessage } from '../../common/errors.ts';
import type { TraceCarrier } from '../../telemetry/carrier.ts';
import { GEN_AI, invokeAgent, spanCarrier } from '../../telemetry/spans.ts';
import type { LlmAgent } from '../model/agent.ts';
import { classOf } from '../model/errors.ts';
import type { ChatMessage, ToolCall } from '../model/model.ts';
import { callId, specsNamed } from '../tools/tools.ts';
import { probeMessage } from '../tools/workspace-tools.ts';
import { collect } from './async-calls.ts';
import { auditMessages } from './audit.ts';
import { handle } from './calls.ts';
import { compactionCut, summaryMessage, summaryRequest } from './compaction.ts';
import { describeFields, finalTools } from './contract.ts';
import { endOfStep } from './ending.ts';
import { plan } from './planning.ts';
import { nextStep, onNoToolCalls, timeBoxExceeded } from './policy.ts';
import { turnMessages } from './prompt.ts';
import { answer, unanswered } from './questions.ts';
import { recallMessages, rememberTurn } from './remember.ts';
import { fenced, type TurnEnd, TurnScope } from './scope.ts';
import { type Ctl, foldSteps, pendingToolCalls, transcriptSummary } from './state.ts';

export type { LifeHooks, TurnDeps, TurnEnd } from './scope.ts';

/**
 * One turn of the agent loop: a state machine over the stored steps. Each pass looks at the folded
 * state, does one thing (a model call, one tool call, a plan change), and stores it as a step before
 * the next pass; so a turn killed anywhere resumes from its last stored step and never re-runs a tool
 * call whose result is stored.
 */
export class Turn extends TurnScope {
  /** The turn's `invoke_agent` span once it runs: what its result or Failure artefact carries on. */
  trace: TraceCarrier | undefined;

  /** The turn in its `invoke_agent {role}` span: model calls and tool runs nest under it. */
  run(): Promise<TurnEnd> {
    const { deps } = this;
    return invokeAgent(
      deps.role,
      deps.claim,
      { [GEN_AI.conversationId]: deps.fence.turnId },
      async (span) => {
        this.trace = spanCarrier(span);
        const end = await fenced(() => this.loop());
        span.setAttribute('holt.turn.outcome', end.kind);
        await rememberTurn(this, end, deps.life ? 'a life turn' : `${deps.target.type} ${deps.target.id}`);
        return end;
      },
    );
  }
  private async loop(): Promise<TurnEnd> {
    const { deps } = this;
    this.state = foldSteps(await deps.steps.steps(deps.fence.turnId));
    if (this.state.nextSeq > 0)
      deps.log.info({
        event_type: 'turn_resumed',
        from_seq: this.state.nextSeq,
        llm_steps: this.state.ctl.llmSteps,
      });
    else await this.start();
    if (deps.settings.planning && !this.state.ctl.planned) await plan(this);
    for (;;) {
      if (deps.signal.aborted) return { kind: 'aborted' };
      const { ctl } = this.state;
      const ended = endOfStep(ctl, {
        claimType: deps.claimType,
        resultType: deps.settings.resultType,
        transcript: () => transcriptSummary(this.state.messages),
      });
      if (ended) return ended;
      if (ctl.waiting) {
        if (await answer(this, ctl.waiting)) continue;
        const due = ctl.waiting.deadlineMs;
        if (due === undefined || Date.now() < due)
          return { kind: 'waiting', questionId: ctl.waiting.questionId, untilMs: due };
        await unanswered(this, ctl.waiting);
        continue;
      }
      if (ctl.toolWaits.length) {
        const untilMs = await collect(this);
        if (untilMs !== undefined) return { kind: 'suspended', untilMs };
        continue;
      }
      const [call] = pendingToolCalls(this.state);
      if (call) {
        await handle(this, call);
        continue;
      }
      const over = timeBoxExceeded(
        { turnMs: ctl.startedAtMs, goalMs: ctl.goalAtMs },
        { turnMs: deps.settings.turnTimeoutMs, goalMs: deps.settings.goalTimeoutMs },
        Date.now(),
      );
      if (over) return this.failure(over, 'quota');
      const from = compactionCut(this.state.messages, ctl.headLength, deps.settings.historyKeep);
      if (from !== undefined) {
        await this.compact(from);
        continue;
      }
      const ending = finalTools(deps.settings.mustEndWith);
      const step = nextStep(ctl.llmSteps, deps.settings.maxSteps, ending);
      if (step.kind === 'exhausted')
        return this.failure(
          `step budget exhausted: ${deps.settings.maxSteps} steps without ${ending.join(' or ')}`,
          'quota',
        );
      await this.think(step.step, step.final, step.warning);
    }
  }
  /** Step 0: the prompt, built once (target, context oldest first, memory, failures). */
  private async start(): Promise<void> {
    const { deps } = this;
    // A life turn opens with what woke the agent; a claim's turn with its target and context.
    const o = deps.life
      ? { ...(await deps.life.opening()), extra: {} }
      : { ...(await this.claimOpening()), evidence: 'external_evidence' as const };
    const recalled = await recallMessages(this, o.recallText);
    const audit = await auditMessages(this, o.recallText);
    const head = [...o.messages, ...recalled, ...audit.messages];
    await this.record(
      'init',
      head,
      {
        ...this.state.ctl,
        evidence: o.evidence,
        reviewed: audit.reviewed,
        llmSteps: 0,
        headLength: head.length,
        startedAtMs: Date.now(),
        goalAtMs: o.goalAtMs,
        goalId: o.goalId,
      },
      o.extra,
    );
    deps.events.step({ ...this.base(), phase: 'started', claim_id: deps.claim.id, role: deps.role });
  }
  /** A claim's prompt (target, context oldest first, memory, failures) and its workflow's goal. */
  private async claimOpening(): Promise<{
    messages: ChatMessage[];
    goalId: string;
    goalAtMs: number;
    recallText: string;
    extra: Record<string, unknown>;
  }> {
    const { deps } = this;
    const st = deps.settings;
    const [context, memory, failures] = await Promise.all([
      deps.context(),
      st.workingMemoryBytes > 0 ? deps.memory.memory(deps.instance, deps.role) : undefined,
      deps.store.recentFailures(deps.instance, deps.role),
    ]);
    const messages = turnMessages({
      role: deps.role,
      system: deps.systemPrompt,
      claimType: deps.claimType,
      rework: isRework(deps.claim),
      target: deps.target,
      context,
      memory,
      memoryBytes: st.workingMemoryBytes,
      failures,
      mustEndWith: st.mustEndWith,
      resultFields: describeFields(this.fields),
      maxSteps: st.maxSteps,
    });
    // The workflow's goal, as far as the turn sees: the oldest of its target and context.
    const goal = [deps.target, ...context].reduce((a, b) => (b.created_at_ms < a.created_at_ms ? b : a));
    return {
      messages,
      goalId: goal.id,
      goalAtMs: goal.created_at_ms,
      recallText: `${deps.target.type}: ${deps.target.payload}`.slice(0, 4_000),
      extra: { context_size: context.length },
    };
  }
  /** One model call (a ReAct step), stored with its usage and cost before anything acts on it. */
  private async think(step: number, final: boolean, warning?: string): Promise<void> {
    const { deps } = this;
    const probe = deps.settings.stateProbe ? await this.probe() : undefined;
    const pre: ChatMessage[] = [
      ...(probe ? [{ role: 'user' as const, content: probe }] : []),
      ...(warning ? [{ role: 'user' as const, content: warning }] : []),
    ];
    const tools = final ? specsNamed(this.tools, finalTools(deps.settings.mustEndWith)) : this.tools.specs;
    let reply: Awaited<ReturnType<LlmAgent['call']>>;
    try {
      reply = await deps.agent.call(
        'turn',
        deps.fence.turnId,
        { messages: [...this.state.messages, ...pre], tools, stream: deps.settings.stream },
        {
          signal: deps.signal,
          onChunk: (text) =>
            deps.events.chunk({ ...this.base(), seq: this.chunkSeq++, text: deps.scrub.text(text) }),
        },
      );
    } catch (e) {
      if (deps.signal.aborted) return;
      const reason = errorMessage(e);
      const failed = { reason, errorClass: classOf(e) };
      await this.record(
        'llm',
        [],
        { ...this.state.ctl, failed },
        { error: reason, step, error_class: failed.errorClass },
      );
      return;
    }
    // Our own ids: unique in the turn whatever the server sends, so "has a result" is exact on resume.
    const calls: ToolCall[] = reply.toolCalls.map((c, i) => ({ ...c, id: callId(this.state.nextSeq, i) }));
    const assistant: ChatMessage = {
      role: 'assistant',
      content: reply.content,
      ...(calls.length ? { tool_calls: calls } : {}),
    };
    let ctl: Ctl = { ...this.state.ctl, llmSteps: this.state.ctl.llmSteps + 1 };
    const post: ChatMessage[] = [];
    if (!calls.length) {
      const n = onNoToolCalls(deps.settings.mustEndWith, reply.content, this.fields);
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
        model: deps.settings.model,
      },
      calls.map((c) => c.id),
    );
    deps.events.step({
      ...this.base(),
      phase: 'replied',
      claim_id: deps.claim.id,
      role: deps.role,
      usage: { prompt_tokens: reply.usage.promptTokens, completion_tokens: reply.usage.completionTokens },
    });
  }
  /** The state probe's message: what the turn wrote, whether it is still there, the last commands and errors. */
  private async probe(): Promise<string | undefined> {
    const p = this.state.ctl.probe;
    if (!p.written.length && !p.commands.length && !p.errors.length) return undefined;
    const r = p.written.length
      ? await this.deps.runner
          .file({ op: 'exists', root: this.deps.workspace, paths: p.written })
          .catch(() => undefined)
      : undefined;
    return probeMessage(p, r?.ok ? (r.exists ?? []) : []);
  }
  /**
   * Compaction: the exchanges in [head, from) become one summary, written by the model (or, when that
   * call fails, the turn's own account of them), stored as a step so a resume folds to the same messages.
   */
  private async compact(from: number): Promise<void> {
    const { deps } = this;
    const head = this.state.ctl.headLength;
    const older = this.state.messages.slice(head, from);
    const extra: Record<string, unknown> = { compact: { head, from }, compacted_messages: older.length };
    let summary: string;
    try {
      const r = await deps.agent.call(
        'turn',
        deps.fence.turnId,
        { messages: summaryRequest(this.state.messages.slice(0, head), older) },
        { signal: deps.signal },
      );
      summary = r.content;
      extra.llm_usage = r.usage;
      extra.llm_response_cost = r.costUsd;
    } catch (e) {
      if (deps.signal.aborted) return;
      // Compaction is an economy, never a reason to fail the turn: the account is shorter than the steps.
      summary = transcriptSummary(older, 3000);
      extra.summary_error = errorMessage(e);
      deps.log.warn({ event_type: 'compaction_fallback', error: extra.summary_error });
    }
    await this.record('compact', [summaryMessage(summary)], this.state.ctl, extra);
  }
}
