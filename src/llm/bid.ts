import { z } from 'zod';
import { type Artefact, BidType } from '../blackboard/types.ts';
import { errorMessage } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import type { BidChoice } from '../pup/decide.ts';
import type { LlmAgent } from './model/agent.ts';
import { bidMessages, extractJson } from './turn/prompt.ts';

const BidReply = z.object({ bid: BidType, reason: z.string().optional() });

/** The model's reply → a bid word, or why not (pure). */
export function parseBid(
  content: string,
): { ok: true; bid: BidType; reason?: string } | { ok: false; reason: string } {
  const word = BidType.safeParse(content.trim().toLowerCase());
  if (word.success) return { ok: true, bid: word.data };
  const r = BidReply.safeParse(extractJson(content));
  if (r.success) return { ok: true, bid: r.data.bid, reason: r.data.reason };
  return {
    ok: false,
    reason: `the model's bid is not one of ${BidType.options.join('|')}: ${JSON.stringify(content.slice(0, 100))}`,
  };
}

/**
 * Why an agent must not bid on this target, or null (pure): its own Question is for others to answer
 * (a turn of ours winning it would answer for the asking turn, and spend the model's replies), and an
 * Answer to its own Question resumes the asking turn itself (turn.ts), so that Answer's claim is not ours.
 */
export function ownQuestionReason(
  target: Pick<Artefact, 'structural_type' | 'produced_by_role'>,
  sources: readonly (Pick<Artefact, 'structural_type' | 'produced_by_role'> | null | undefined)[],
  role: string,
): string | null {
  if (target.structural_type === 'Question' && target.produced_by_role === role)
    return 'our own question is for others to answer';
  if (
    target.structural_type === 'Answer' &&
    sources.some((a) => a?.structural_type === 'Question' && a.produced_by_role === role)
  )
    return 'an Answer to our own question resumes the asking turn';
  return null;
}

/** Bids with the model (claim prompt + target). Any failure bids `ignore` and says why; never throws. */
export async function llmBid(
  agent: LlmAgent,
  target: Artefact,
  claimPrompt: string | undefined,
  log: Logger,
): Promise<BidChoice> {
  try {
    const reply = await agent.call('bid', null, {
      messages: bidMessages(claimPrompt, agent.deps.role, target),
      json: true,
    });
    const p = parseBid(reply.content);
    if (p.ok) {
      log.info({
        event_type: 'llm_bid',
        artefact_id: target.id,
        bid: p.bid,
        reason: p.reason?.slice(0, 200),
      });
      return { bid: p.bid, source: 'llm' };
    }
    return { bid: 'ignore', source: 'default', fallbackReason: p.reason };
  } catch (e) {
    return {
      bid: 'ignore',
      source: 'default',
      fallbackReason: `LLM bid failed: ${errorMessage(e)}`,
    };
  }
}
