import type { Page } from 'puppeteer-core';
import type { Blackboard } from '../blackboard/client.ts';
import { artefact } from '../blackboard/testkit.ts';
import type { Artefact } from '../blackboard/types.ts';

/** Test helpers of the console's browser tests: a question on the board, answered in the page. */

/** A Question of the Writer on the board, citing `sources`. */
export async function askQuestion(
  bb: Blackboard,
  payload: string,
  sources: string[] = [],
): Promise<Artefact> {
  const q = artefact({
    structural_type: 'Question',
    type: 'Question',
    payload,
    source_artefacts: sources,
    produced_by_role: 'Writer',
  });
  await bb.createArtefact(q);
  return q;
}

/** The questions page, once the question's card shows; resolves with the card's selector. */
export async function openQuestion(p: Page, id: string): Promise<string> {
  await p.click('[data-page="questions"]');
  const card = `[data-question="${id}"]`;
  await p.waitForSelector(card);
  return card;
}

/** Types an answer into the card and sends it; resolves once the question has left the list. */
export async function answerCard(p: Page, card: string, text: string): Promise<void> {
  await p.type(`${card} textarea`, text);
  await p.click(`${card} [data-act="answer"]`);
  await p.waitForSelector(card, { hidden: true });
}

/** The Answers on the board that cite the question. */
export async function answersTo(bb: Blackboard, questionId: string): Promise<Artefact[]> {
  return (await bb.getArtefacts(await bb.listArtefactIds())).filter(
    (a): a is Artefact => a?.structural_type === 'Answer' && a.source_artefacts.includes(questionId),
  );
}

/**
 * What the server answers when the page's own script posts an answer with its session's CSRF token
 * (a read-only session's page has no button for it: this is the request it would make).
 */
export function answerFromScript(p: Page, questionId: string, text: string): Promise<number> {
  return p.evaluate(
    async (id: string, t: string) => {
      const s = (await (await fetch('api/session')).json()) as { csrf: string };
      const r = await fetch(`api/questions/${id}/answer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-holt-csrf': s.csrf },
        body: JSON.stringify({ text: t }),
      });
      return r.status;
    },
    questionId,
    text,
  );
}
