/**
 * The outcome of a message (pure): what became of what it asked, as its sender is told (a delivery to
 * its callback, an A2A task's state). It is followed from the turn the message was delivered to:
 * - that turn made a work item: the item's fate (open: working, or input-required while an operator's
 *   wait blocks it; completed: its report; cancelled);
 * - else the turn's end: still running, failed, or done; done on a wait, the turn that wait woke (a
 *   wait still open: working, or input-required for an operator's); done otherwise, its final text.
 * Each hop is decided from one read of the turn (hop), so the reader walks the chain (replies.ts).
 */

export const OUTCOME_STATES = [
  'submitted',
  'working',
  'input_required',
  'completed',
  'failed',
  'canceled',
] as const;
export type OutcomeState = (typeof OUTCOME_STATES)[number];

export interface Outcome {
  state: OutcomeState;
  /** completed: the report or the final text; failed: why; input_required: what it waits for. */
  text?: string;
  itemId?: string;
  /** The last turn followed. */
  turnId?: string;
}

/** What one turn of the chain shows: the turn, the first item it made, the last wait it set. */
export interface Hop {
  turnId: string;
  turn: { status: 'queued' | 'running' | 'done' | 'failed'; summary?: string; error?: string | null } | null;
  item: {
    id: string;
    state: 'open' | 'completed' | 'cancelled';
    report: string | null;
    operatorWait?: string;
  } | null;
  wait: {
    kind: 'timer' | 'message' | 'operator';
    on: string;
    state: 'waiting' | 'resolved' | 'timed_out' | 'cancelled';
    turnId: string | null;
  } | null;
}

export const FINAL_STATES: ReadonlySet<OutcomeState> = new Set(['completed', 'failed', 'canceled']);
export const isFinal = (o: Outcome) => FINAL_STATES.has(o.state);

/** One hop: the outcome it settles, or the turn to follow next (the one its ended wait woke). */
export function hopOutcome(h: Hop): Outcome | { next: string } {
  const at = { turnId: h.turnId };
  if (h.item) {
    const itemId = h.item.id;
    if (h.item.state === 'completed') return { state: 'completed', text: h.item.report ?? '', itemId, ...at };
    if (h.item.state === 'cancelled') return { state: 'canceled', itemId, ...at };
    return h.item.operatorWait !== undefined
      ? { state: 'input_required', text: h.item.operatorWait, itemId, ...at }
      : { state: 'working', itemId, ...at };
  }
  if (!h.turn || h.turn.status === 'queued' || h.turn.status === 'running')
    return { state: 'working', ...at };
  if (h.turn.status === 'failed') return { state: 'failed', text: h.turn.error ?? 'the turn failed', ...at };
  if (h.wait) {
    if (h.wait.state === 'waiting')
      return h.wait.kind === 'operator'
        ? { state: 'input_required', text: h.wait.on, ...at }
        : { state: 'working', ...at };
    if (h.wait.turnId) return { next: h.wait.turnId };
    return { state: 'working', ...at }; // ended, its turn not yet recorded
  }
  return { state: 'completed', text: h.turn.summary ?? '', ...at };
}
