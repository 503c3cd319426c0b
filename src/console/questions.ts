import { APPROVAL_TYPE, settles } from '../blackboard/approval.ts';
import type { Artefact } from '../blackboard/types.ts';

/**
 * The console's open questions, kept one artefact at a time: a Question is open until an Answer
 * settles it (for an approval of a tool call, only a person's). Pure.
 */

export interface OpenQuestion {
  id: string;
  /** Who asked. */
  role: string;
  /** The question's text: untrusted, shown as text. */
  text: string;
  /** It asks a person to approve a tool call (answered approve, or reject with a reason). */
  approval: boolean;
  askedAtMs: number;
  /** What it cites (its source artefacts): its context, opened on the page one at a time. */
  sources: string[];
}

export type QuestionChange = { open: true; question: OpenQuestion } | { open: false; id: string };

export class QuestionIndex {
  readonly #open = new Map<string, { q: OpenQuestion; type: string }>();
  /** Answers seen before their Question (the board read in order, but a backstop may not be). */
  readonly #answers: Artefact[] = [];

  add(a: Artefact): QuestionChange[] {
    if (a.structural_type === 'Question') {
      if (this.#answers.some((x) => settles(a, x))) return [];
      const q: OpenQuestion = {
        id: a.id,
        role: a.produced_by_role,
        text: a.payload,
        approval: a.type === APPROVAL_TYPE,
        askedAtMs: a.created_at_ms,
        sources: a.source_artefacts,
      };
      this.#open.set(a.id, { q, type: a.type });
      return [{ open: true, question: q }];
    }
    if (a.structural_type !== 'Answer') return [];
    this.#answers.push(a);
    const out: QuestionChange[] = [];
    for (const id of a.source_artefacts) {
      const o = this.#open.get(id);
      if (o && settles({ id, type: o.type }, a)) {
        this.#open.delete(id);
        out.push({ open: false, id });
      }
    }
    return out;
  }

  get(id: string): OpenQuestion | undefined {
    return this.#open.get(id)?.q;
  }

  /** Open questions, the oldest first. */
  list(): OpenQuestion[] {
    return [...this.#open.values()].map((o) => o.q).sort((a, b) => a.askedAtMs - b.askedAtMs);
  }
}
