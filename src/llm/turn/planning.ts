import { errorMessage } from '../../common/errors.ts';
import { PausedError } from '../model/agent.ts';
import type { ChatMessage, ToolCall } from '../model/model.ts';
import { MARK_SUBTASK_COMPLETE, SUBMIT_RESULT } from '../tools/tools.ts';
import { clearBlocks } from './loop-guard.ts';
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
import { extractJson, planMessages, subPlanMessages } from './prompt.ts';
import type { TurnScope } from './scope.ts';
import type { Ctl } from './state.ts';

/** Planning agents (settings.planning): the goal's plan made or carried on, and its subtasks marked. */

/** Planning agents decompose the goal first (structured output); a bad plan falls back to one task. */
export async function plan(t: TurnScope): Promise<void> {
  const { deps } = t;
  deps.events.step({ ...t.base(), phase: 'planning', claim_id: deps.claim.id, role: deps.role });
  const goal = deps.target.payload.slice(0, 500) || deps.target.type;
  // A plan an earlier turn made for this goal, with work left in it, is carried on.
  const stored =
    deps.plans && t.state.ctl.goalId
      ? await deps.plans.load(deps.instance, deps.role, t.state.ctl.goalId)
      : undefined;
  // After a strategic review the goal is planned afresh, with the review in view.
  if (stored && activeLeaf(stored) && !t.state.ctl.reviewed) {
    const note: ChatMessage = {
      role: 'user',
      content: `Your plan for this goal, carried on from earlier turns (work on the subtask marked →; call ${MARK_SUBTASK_COMPLETE} when it is done or has failed):\n${renderPlan(stored)}`,
    };
    await t.record(
      'plan',
      [note],
      { ...t.state.ctl, planned: true, plan: stored, headLength: t.state.ctl.headLength + 1 },
      { plan_source: 'goal' },
    );
    return;
  }
  let plan = trivialPlan(goal);
  const extra: Record<string, unknown> = {};
  try {
    const r = await deps.agent.call(
      'plan',
      deps.fence.turnId,
      { messages: planMessages(t.state.messages), json: true },
      { signal: deps.signal },
    );
    const parsed = Decomposition.safeParse(extractJson(r.content));
    if (parsed.success) plan = planFrom(goal, parsed.data);
    else extra.plan_error = `decomposition unusable: ${parsed.error.issues[0]?.message}`;
    extra.llm_usage = r.usage;
    extra.llm_response_cost = r.costUsd;
  } catch (e) {
    if (e instanceof PausedError) {
      await t.record(
        'plan',
        [],
        { ...t.state.ctl, planned: true, failed: { reason: e.message, errorClass: e.errorClass } },
        { error: e.message },
      );
      return;
    }
    extra.plan_error = errorMessage(e);
  }
  if (extra.plan_error) deps.log.warn({ event_type: 'plan_fallback', reason: extra.plan_error });
  const note: ChatMessage = {
    role: 'user',
    content: `Your plan (work on the subtask marked →; call ${MARK_SUBTASK_COMPLETE} when it is done or has failed):\n${renderPlan(plan)}`,
  };
  await t.record(
    'plan',
    [note],
    { ...t.state.ctl, planned: true, plan, headLength: t.state.ctl.headLength + 1 },
    extra,
  );
}

/** mark_subtask_complete: advance, retry, or escalate (decompose further, then give up). */
export async function mark(t: TurnScope, call: ToolCall, success: boolean, reason: string): Promise<void> {
  const { deps } = t;
  const ctl = t.state.ctl;
  const msg = (content: string, next: Ctl, extra: Record<string, unknown> = {}) =>
    t.record('subtask', [t.toolMsg(call, content)], next, { tool: MARK_SUBTASK_COMPLETE, ...extra }, [
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
        const r = await deps.agent.call(
          'plan',
          deps.fence.turnId,
          {
            messages: subPlanMessages(
              t.state.messages.slice(0, 2),
              effect.node.description,
              effect.node.reasons,
            ),
            json: true,
          },
          { signal: deps.signal },
        );
        extra.llm_usage = r.usage;
        extra.llm_response_cost = r.costUsd;
        const p = SubDecomposition.safeParse(extractJson(r.content));
        if (p.success) subtasks = p.data.subtasks;
      } catch (e) {
        extra.plan_error = errorMessage(e);
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
