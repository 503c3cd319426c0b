import { v5 as uuidv5 } from 'uuid';
import { childrenOf } from '../../blackboard/claim-engine.ts';
import type { Artefact } from '../../blackboard/types.ts';
import type { ChatMessage, ToolCall } from '../model/model.ts';
import { ASK_QUESTION } from '../tools/tools.ts';
import { approvalAnswered, approvalTimedOut } from './approval.ts';
import { QUESTION_NS, type TurnScope } from './scope.ts';

/** A question the turn waits on: the tool call it answers, and when it stops waiting (if ever). */
type Waiting = { toolCallId: string; questionId: string; deadlineMs?: number; approval?: boolean };

/** ask_question: the Question artefact first (idempotent id), then the waiting state; the turn suspends. */
export async function ask(t: TurnScope, call: ToolCall, question: string, deadlineSeconds?: number) {
  const { deps } = t;
  const id = uuidv5(`${deps.fence.turnId}/${call.id}`, QUESTION_NS);
  await deps.bb.createArtefact({
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Question',
    type: 'Question',
    payload: deps.scrub.text(question),
    source_artefacts: [deps.target.id],
    produced_by_role: deps.role,
  });
  deps.log.info({ event_type: 'question_asked', question_id: id });
  await t.record(
    'question',
    [],
    {
      ...t.state.ctl,
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
export async function answer(t: TurnScope, w: Waiting): Promise<boolean> {
  if (w.approval) return approvalAnswered(t, w); // only a person's verdict, and the call still to run
  const { deps } = t;
  const kids = await deps.bb.getArtefacts(await childrenOf(deps.bb, w.questionId));
  const a = kids
    .filter((x): x is Artefact => x?.structural_type === 'Answer')
    .sort((x, y) => x.created_at_ms - y.created_at_ms)[0];
  if (!a) return false;
  deps.log.info({ event_type: 'question_answered', question_id: w.questionId, answer_id: a.id });
  const msg: ChatMessage = {
    role: 'tool',
    tool_call_id: w.toolCallId,
    content: deps.scrub.text(JSON.stringify({ answer: a.payload, answered_by: a.produced_by_role })),
  };
  await t.record('answer', [msg], { ...t.state.ctl, waiting: undefined }, { answer_id: a.id }, [
    w.toolCallId,
  ]);
  return true;
}

/** A question past its deadline: the model gets a timeout report and goes on (the Question stays). */
export async function unanswered(t: TurnScope, w: Waiting): Promise<void> {
  if (w.approval) return approvalTimedOut(t, w);
  t.deps.log.info({ event_type: 'question_timed_out', question_id: w.questionId });
  const msg: ChatMessage = {
    role: 'tool',
    tool_call_id: w.toolCallId,
    content: `error: no answer to question ${w.questionId} by its deadline (${new Date(w.deadlineMs ?? 0).toISOString()}): this is a timeout report, not an answer. Decide without it.`,
  };
  await t.record(
    'answer',
    [msg],
    { ...t.state.ctl, waiting: undefined },
    { question_id: w.questionId, timed_out: true },
    [w.toolCallId],
  );
}
