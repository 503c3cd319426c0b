import { readiness, type WorkItem } from '../work/items.ts';

/**
 * The scheduler of a living agent (docs/runtime-model.md § Living agents): one pure decision over a read-only
 * snapshot of the agent. The loop (loop.ts) takes the snapshot, asks, and commits the decision in one
 * transaction with its audit row (store.ts); nothing here does I/O or reads a clock.
 */

export interface ToolWaitView {
  toolCallId: string;
  state: 'waiting' | 'received';
  deadlineMs: number | null;
}

export interface WaitView {
  id: string;
  kind: 'timer' | 'message' | 'operator';
  itemId: string | null;
  deadlineMs: number | null;
  /** An operator cancelled it (life/tasks.ts): the next turn ends it and is told. */
  cancelled?: boolean;
}

export interface LifeSnapshot {
  nowMs: number;
  state: 'running' | 'stopped';
  /** The agent's life turn that has not ended, if any. */
  turn: {
    id: string;
    status: 'dispatched' | 'running' | 'suspended';
    /** Someone holds its lease right now (this process or another). */
    leaseLive: boolean;
    leaseExpiresMs: number | null;
    toolWaits: ToolWaitView[];
  } | null;
  /** Messages and wake hints not yet delivered to a turn, with their body's size and priority (0-9). */
  messages: {
    id: string;
    kind: 'message' | 'wake';
    origin: string;
    /** Its labels' authority: an operator's instruction ends an operator wait, whatever its surface (A2A too). */
    authority?: string;
    bytes?: number;
    priority?: number;
  }[];
  /** The most message bytes one turn is fed (HOLT_LIFE_TURN_BYTES); the rest waits for the next turn. */
  turnBytes?: number;
  /** Waits still waiting. */
  waits: WaitView[];
  /** Open work items. */
  items: WorkItem[];
  /** When the last life turn was started (ms), or 0. */
  lastTurnMs: number;
}

export type WaitOutcome = { id: string; outcome: 'resolved' | 'timed_out' | 'cancelled' };

export type Decision =
  | { kind: 'stop'; why: string }
  | { kind: 'resume'; turnId: string; why: string }
  | { kind: 'wait'; untilMs: number | null; why: string }
  | { kind: 'start'; messageIds: string[]; waits: WaitOutcome[]; why: string; deferred?: number }
  | { kind: 'tick'; itemId: string; why: string }
  | { kind: 'sleep'; untilMs: number | null; why: string };

const min = (xs: (number | null | undefined)[]): number | null => {
  const v = xs.filter((x): x is number => typeof x === 'number');
  return v.length ? Math.min(...v) : null;
};

/** Ids are bigints as text: the shorter is the smaller, then the order of their digits. */
const byId = (a: { id: string }, b: { id: string }) =>
  a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The order messages are fed in: the higher priority first, the older first within a priority. */
export const byPriority = (a: LifeSnapshot['messages'][number], b: LifeSnapshot['messages'][number]) =>
  (b.priority ?? 0) - (a.priority ?? 0) || byId(a, b);

/**
 * The messages one turn gets: the highest priority first, the oldest first within one, as long as their
 * bodies fit in `turnBytes` (the first always, so none is stuck); the others stay queued for the next
 * turn (a higher priority that comes meanwhile goes before them).
 */
export function fitTurn(msgs: LifeSnapshot['messages'], turnBytes = Number.POSITIVE_INFINITY) {
  let used = 0;
  let n = 0;
  msgs = [...msgs].sort(byPriority);
  for (const m of msgs) {
    const b = m.bytes ?? 0;
    if (n > 0 && used + b > turnBytes) break;
    used += b;
    n++;
  }
  return msgs.slice(0, n);
}

/**
 * Which open waits end now, and how: a cancelled one first, a timer by firing, a message wait by a
 * message or its deadline.
 */
function endedWaits(s: LifeSnapshot, delivered: LifeSnapshot['messages']): WaitOutcome[] {
  const hasMessage = delivered.some((m) => m.kind === 'message');
  const fromOperator = delivered.some(
    (m) => m.kind === 'message' && (m.origin === 'operator' || m.authority === 'operator_instruction'),
  );
  const out: WaitOutcome[] = [];
  for (const w of s.waits) {
    const due = w.deadlineMs !== null && w.deadlineMs <= s.nowMs;
    const met = w.kind === 'message' ? hasMessage : w.kind === 'operator' ? fromOperator : false;
    if (w.cancelled) out.push({ id: w.id, outcome: 'cancelled' });
    else if (met) out.push({ id: w.id, outcome: 'resolved' });
    else if (due) out.push({ id: w.id, outcome: w.kind === 'timer' ? 'resolved' : 'timed_out' });
  }
  return out;
}

/**
 * What the agent does next. In order: a stopped agent does nothing; an unfinished turn comes first
 * (resumed when interrupted, or when its tool results are in or overdue; waited for otherwise); then
 * whatever came in (messages, wake hints, waits that ended) starts one turn that gets all of it, so
 * wakes that arrive while the agent runs coalesce; then a work item that became runnable since the last
 * turn (its recheck time passed, or it changed) gets a system tick; else the agent sleeps until its next
 * deadline.
 */
export function decide(s: LifeSnapshot): Decision {
  if (s.state === 'stopped') return { kind: 'stop', why: 'the agent is stopped' };
  const t = s.turn;
  if (t) {
    if (t.status === 'suspended') {
      const received = t.toolWaits.every((w) => w.state === 'received');
      const overdue = t.toolWaits.some(
        (w) => w.state === 'waiting' && w.deadlineMs !== null && w.deadlineMs <= s.nowMs,
      );
      if (received || overdue)
        return {
          kind: 'resume',
          turnId: t.id,
          why: received ? 'its tool results are in' : 'a tool call passed its deadline',
        };
      return {
        kind: 'wait',
        untilMs: min(t.toolWaits.map((w) => w.deadlineMs)),
        why: `turn ${t.id} waits for ${t.toolWaits.length} tool result(s)`,
      };
    }
    if (t.leaseLive) return { kind: 'wait', untilMs: t.leaseExpiresMs, why: `turn ${t.id} is running` };
    return { kind: 'resume', turnId: t.id, why: 'its turn was interrupted' };
  }
  const fed = fitTurn(s.messages, s.turnBytes);
  const deferred = s.messages.length - fed.length;
  const ended = endedWaits(s, fed);
  if (fed.length || ended.length)
    return {
      kind: 'start',
      messageIds: fed.map((m) => m.id),
      waits: ended,
      why: [
        fed.length ? `${fed.length} message(s) or wake(s) came in` : '',
        deferred ? `${deferred} more wait for the next turn` : '',
        ended.length ? `${ended.length} wait(s) ended` : '',
      ]
        .filter(Boolean)
        .join(', '),
      ...(deferred ? { deferred } : {}),
    };
  const states = new Map(s.items.map((i) => [i.id, i.state]));
  for (const i of [...s.items].sort((a, b) => a.createdAtMs - b.createdAtMs)) {
    const r = readiness(i, s.nowMs, states);
    if (r.kind !== 'runnable') continue;
    if (i.recheckAtMs !== null && i.recheckAtMs <= s.nowMs)
      return { kind: 'tick', itemId: i.id, why: 'its recheck time passed' };
    if (i.updatedAtMs > s.lastTurnMs)
      return { kind: 'tick', itemId: i.id, why: 'it is runnable and changed since the last turn' };
  }
  const next = min([
    ...s.waits.map((w) => w.deadlineMs),
    ...s.items.map((i) => i.recheckAtMs),
    ...s.items.flatMap((i) => i.blockedBy.map((b) => (b.kind === 'wait' ? b.deadlineMs : undefined))),
  ]);
  return { kind: 'sleep', untilMs: next, why: next === null ? 'nothing to do' : 'until the next deadline' };
}
