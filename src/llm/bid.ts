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
