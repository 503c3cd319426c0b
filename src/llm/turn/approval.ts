import { v5 as uuidv5 } from 'uuid';
import { APPROVAL_TYPE, settles } from '../../blackboard/approval.ts';
import { childrenOf } from '../../blackboard/claim-engine.ts';
import type { Artefact } from '../../blackboard/types.ts';
import type { ToolCall } from '../model/model.ts';
import { QUESTION_NS, type TurnScope } from './scope.ts';
import type { Ctl } from './state.ts';

/**
 * Approval of risky calls: a call to a tool marked `require_approval` (a declared command tool, or an
 * MCP tool its server lists) becomes a Question before it runs, and runs only once a person approves.
 * The verdict is stored in the turn's control state by call id, so a pup killed while waiting (or
 * after the verdict) resumes to the same decision: an approved call runs once, a rejected one never.
 */

/**
 * The arguments shown in the Question, at most: a person approves what they see, so longer ones are
 * refused rather than cut (a cut would hide the tail that runs).
 */
export const ARGS_CHARS = 32_000;

export type Approval = 'approved' | { rejected: string } | 'waiting';
export type Verdict = { approved: boolean; reason: string };

const APPROVE = new Set(['approve', 'approved', 'yes']);
const REJECT = new Set(['reject', 'rejected', 'no', 'deny', 'denied']);

/**
 * The answer grammar: the first word decides (case-insensitive, ended by a space, `:`, `,`, `.`, `!`
 * or the end). approve / approved / yes approve (the rest is a note); reject / rejected / no / deny /
 * denied reject, the rest being the reason; any other answer rejects, the whole answer being the reason.
 */
export function verdictOf(answer: string): Verdict {
  const text = answer.trim();
  const m = /^([A-Za-z]+)(?=$|[\s:,.!])[\s:,.!]*([\s\S]*)$/.exec(text);
  const word = m?.[1]?.toLowerCase() ?? '';
  if (APPROVE.has(word)) return { approved: true, reason: '' };
  if (REJECT.has(word)) return { approved: false, reason: m?.[2]?.trim() || 'rejected without a reason' };
  return { approved: false, reason: text };
}

/**
 * Invisible characters (bidi overrides, zero-width and other format characters, C1 controls, private
 * and unassigned code points, line separators) as \u{…}, so the arguments a person approves read as
 * they are. JSON already escapes the C0 controls.
 */
export const visible = (s: string) =>
  s.replace(
    /[\p{Cf}\p{Co}\p{Cn}\u0080-\u009F\u2028\u2029]/gu,
    (c) => `\\u{${c.codePointAt(0)!.toString(16).toUpperCase()}}`,
  );

/** The approval Question's id: one per turn and call, so asking again after a crash writes nothing new. */
export const approvalQuestionId = (turnId: string, callId: string) =>
  uuidv5(`${turnId}/${callId}/approval`, QUESTION_NS);

/**
 * Before a call that needs approval runs: the verdict when there is one; else the Question is posted
 * (idempotent id) and the turn waits on it (the caller stores nothing more and returns).
 */
export async function awaitApproval(
  t: TurnScope,
  call: ToolCall,
  what: { tool: string; args: Record<string, unknown> },
): Promise<Approval> {
  const { deps } = t;
  const ctl = t.state.ctl;
  const decided = ctl.approvals[call.id];
  if (decided) return decided.approved ? 'approved' : { rejected: decided.reason };
  if (deps.life)
    return {
      rejected:
        "it needs a person's approval, and a living agent's own turn cannot wait for one (only a turn on a claim can)",
    };
  const args = visible(deps.scrub.text(JSON.stringify(what.args, null, 2)));
  if (args.length > ARGS_CHARS)
    return {
      rejected: `its arguments (${args.length} characters as JSON) are too long to show a person for approval (at most ${ARGS_CHARS}); nothing was asked. Pass shorter arguments`,
    };
  const id = approvalQuestionId(deps.fence.turnId, call.id);
  const deadlineMs = Date.now() + deps.settings.approvalTimeoutMs;
  await deps.bb.createArtefact({
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Question',
    type: APPROVAL_TYPE,
    payload: [
      `Approve a call to the tool ${deps.scrub.text(what.tool)} by agent ${deps.role}?`,
      `Arguments:\n${args}`,
      `Answer "approve" (or "yes") to run it once; "reject: <reason>" (or "no: <reason>") to refuse it. Any other answer refuses it, with the answer as the reason. Without a person's answer by ${new Date(deadlineMs).toISOString()} the call is refused.`,
    ].join('\n'),
    source_artefacts: [deps.target.id],
    produced_by_role: deps.role,
  });
  deps.log.info({ event_type: 'approval_asked', question_id: id, tool: what.tool, tool_call_id: call.id });
  await t.record(
    'approval',
    [],
    { ...ctl, waiting: { toolCallId: call.id, questionId: id, deadlineMs, approval: true } },
    { question_id: id, tool: what.tool },
    [call.id],
  );
  return 'waiting';
}

/** The verdict stored and the wait over: the call is pending again and its dispatch reads the verdict. */
function decide(t: TurnScope, toolCallId: string, v: Verdict, extra: Record<string, unknown>) {
  const ctl = t.state.ctl;
  const next: Ctl = { ...ctl, waiting: undefined, approvals: { ...ctl.approvals, [toolCallId]: v } };
  return t.record('approval', [], next, { approved: v.approved, ...extra }, [toolCallId]);
}

/** A person's Answer citing the approval Question decides it; anyone else's is ignored. */
export async function approvalAnswered(
  t: TurnScope,
  w: { toolCallId: string; questionId: string },
): Promise<boolean> {
  const { deps } = t;
  const answers = (await deps.bb.getArtefacts(await childrenOf(deps.bb, w.questionId)))
    .filter((x): x is Artefact => x?.structural_type === 'Answer')
    .sort((x, y) => x.created_at_ms - y.created_at_ms);
  const question = { id: w.questionId, type: APPROVAL_TYPE };
  const a = answers.find((x) => settles(question, x));
  for (const x of answers.filter((y) => !settles(question, y)))
    deps.log.warn({
      event_type: 'approval_answer_ignored',
      question_id: w.questionId,
      answer_id: x.id,
      produced_by_role: x.produced_by_role,
    });
  if (!a) return false;
  const v = verdictOf(a.payload);
  deps.log.info({
    event_type: v.approved ? 'approval_granted' : 'approval_rejected',
    question_id: w.questionId,
    answer_id: a.id,
  });
  await decide(t, w.toolCallId, v, { question_id: w.questionId, answer_id: a.id });
  return true;
}

/** No person answered by the deadline: the call is refused (the Question stays for people). */
export async function approvalTimedOut(
  t: TurnScope,
  w: { toolCallId: string; questionId: string },
): Promise<void> {
  const s = Math.round(t.deps.settings.approvalTimeoutMs / 1000);
  t.deps.log.info({ event_type: 'approval_timed_out', question_id: w.questionId });
  await decide(
    t,
    w.toolCallId,
    { approved: false, reason: `no answer within ${s} s (question ${w.questionId})` },
    { question_id: w.questionId, timed_out: true },
  );
}

/** The model's tool error for a refused call. */
export const refusal = (tool: string, reason: string) =>
  `error: ${tool} was not run: a person's approval was required and the call was refused: ${reason}`;
