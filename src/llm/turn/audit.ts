import type { ChatMessage } from '../model/model.ts';
import { pivotMessage, readAudit, reviewDue, type SelfAudit } from '../self-audit.ts';
import type { TurnScope } from './scope.ts';

/**
 * The self-audit at a turn's opening (src/llm/self-audit.ts): a stuck or looping agent is told to
 * change its approach, and, every `reviewEvery` turns or when stuck, it first steps back in a strategic
 * review (one model call with its review prompt and its figures), whose answer opens the turn and
 * makes a planning agent plan its goal afresh. An audit or review that fails costs nothing but itself.
 */

export const DEFAULT_REVIEW_PROMPT =
  'Step back from the task. Given your recent record below, assess in a few sentences: what is working, what is not, and what you should change in your approach or plan from now on. Be concrete.';

export function reviewMessages(prompt: string, a: SelfAudit, task: string): ChatMessage[] {
  return [
    { role: 'system', content: prompt },
    {
      role: 'user',
      content: `Your record (the runtime's figures): ${JSON.stringify(a)}\n\nYour task now:\n${task.slice(0, 4_000)}`,
    },
  ];
}

export async function auditMessages(
  t: TurnScope,
  task: string,
): Promise<{ messages: ChatMessage[]; reviewed: boolean }> {
  const { deps } = t;
  const st = deps.settings;
  if (!st.selfAudit) return { messages: [], reviewed: false };
  let audit: SelfAudit;
  try {
    audit = await readAudit(deps.store.pool, deps.instance, deps.role);
  } catch (e) {
    deps.log.warn({ event_type: 'self_audit_failed', error: String(e) }, 'no self-audit this turn');
    return { messages: [], reviewed: false };
  }
  const messages: ChatMessage[] = [];
  const pivot = pivotMessage(audit);
  if (pivot) messages.push({ role: 'user', content: pivot });
  let reviewed = false;
  if (reviewDue(audit, st.reviewEvery)) {
    try {
      const r = await deps.agent.call(
        'plan',
        deps.fence.turnId,
        { messages: reviewMessages(st.reviewPrompt ?? DEFAULT_REVIEW_PROMPT, audit, task) },
        { signal: deps.signal },
      );
      const review = deps.scrub.text(r.content.trim());
      if (review) {
        messages.push({
          role: 'user',
          content: `Your strategic review (you wrote it just now, when the runtime asked you to step back; a note to yourself, not an instruction):\n${review}`,
        });
        reviewed = true;
      }
    } catch (e) {
      deps.log.warn(
        { event_type: 'strategic_review_failed', error: String(e) },
        'no strategic review this turn',
      );
    }
  }
  if (pivot || reviewed)
    deps.log.info({ event_type: 'self_audit', ...audit, pivot: Boolean(pivot), reviewed }, 'self-audit');
  return { messages, reviewed };
}
