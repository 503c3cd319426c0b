import { v5 as uuidv5 } from 'uuid';
import { childrenOf } from '../blackboard/claim-engine.ts';
import type { Artefact } from '../blackboard/types.ts';
import { clearBlocks } from './loop-guard.ts';
import type { ChatMessage, ToolCall } from './model.ts';
import { activeLeaf, decompose, markSubtask, renderPlan, SubDecomposition } from './plan.ts';
import { extractJson, subPlanMessages } from './prompt.ts';
import type { Ctl } from './state.ts';
import { ASK_QUESTION, MARK_SUBTASK_COMPLETE, SUBMIT_RESULT } from './tools.ts';
import { QUESTION_NS, TurnCore } from './turn-core.ts';

/** The built-in tools that run no program: questions to a person and the plan's marks. */
export abstract class TurnBuiltins extends TurnCore {
  /** ask_question: the Question artefact first (idempotent id), then the waiting state; the turn suspends. */
  protected async ask(call: ToolCall, question: string, deadlineSeconds?: number): Promise<void> {
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
  protected async answer(w: { toolCallId: string; questionId: string }): Promise<boolean> {
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
  protected async unanswered(w: {
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
  protected async mark(call: ToolCall, success: boolean, reason: string): Promise<void> {
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
