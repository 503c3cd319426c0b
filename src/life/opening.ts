import type { WorkItem } from '../work/items.ts';
import { agentLabels, LABELS_PREAMBLE, runtimeLabels, wrapMessage } from './labels.ts';
import type { Delivery, LifeMessage, LifeWait } from './store.ts';

/**
 * What a life turn opens with (pure): the agent's standing, why it was woken, and everything delivered
 * to it, each piece wrapped in its provenance labels, the model's own writing as agent_note. Wake hints
 * never show their payload (none is kept); several coalesce into one line.
 */
export function lifeOpening(o: {
  role: string;
  system?: string;
  delivery: Delivery;
  messages: LifeMessage[];
  waits: LifeWait[];
  /** The ticked item (a tick delivery), the current item, the other open items. */
  items: { tick?: WorkItem; current?: WorkItem; open: WorkItem[] };
  describe: (i: WorkItem) => string;
  memory?: string;
}): { system: string; user: string } {
  const system = [
    o.system ?? `You are ${o.role}, a long-lived agent of a Holt clan.`,
    'You live across turns: your durable objectives are work items (work_create, work_update, work_pick, work_get, work_list, work_complete, work_handoff to give one to another agent); a completion needs its report.',
    'Each turn starts because something happened. Act on it, then end the turn: call wait to sleep until a time, a message or an operator, or answer with text when there is nothing left to do now.',
  ].join('\n');
  const parts: string[] = [`You were woken: ${o.delivery.why}.`, LABELS_PREAMBLE];
  const real = o.messages.filter((m) => m.kind === 'message');
  for (const m of real) parts.push(wrapMessage(m.labels, m.body ?? '', m.at_ms));
  const wakes = o.messages.filter((m) => m.kind === 'wake');
  if (wakes.length) {
    const last = wakes[wakes.length - 1]!;
    parts.push(
      wrapMessage(
        last.labels,
        `wake hint${wakes.length > 1 ? ` (${wakes.length} coalesced)` : ''}: something you may be waiting on changed; look at it yourself.`,
        last.at_ms,
      ),
    );
  }
  // The runtime's sentences are its instructions; what the model wrote itself (a wait's reason, its
  // items, its memory) follows each as an agent_note, never inside an instruction.
  const byId = new Map(o.waits.map((w) => [w.id, w]));
  for (const ended of o.delivery.waits) {
    const w = byId.get(ended.id);
    if (!w) continue;
    const item = w.item_id ? ` (work item ${w.item_id})` : '';
    const what = w.kind === 'operator' ? 'an operator' : 'a message';
    const text =
      ended.outcome === 'cancelled'
        ? `Cancellation report: an operator cancelled your ${w.kind === 'timer' ? 'timer' : `wait for ${what}`} ${w.id}${item}. Do not wait for it again unless asked; decide what to do without it.`
        : ended.outcome === 'resolved'
          ? w.kind === 'timer'
            ? `Your timer ${w.id}${item} fired.`
            : `Your wait ${w.id} for ${what}${item} is over: see the messages above.`
          : `Timeout report: your wait ${w.id} for ${what}${item} passed its deadline and nothing came. Decide what to do without it.`;
    parts.push(wrapMessage(runtimeLabels(w.kind === 'timer' ? 'timer' : 'system'), text));
    parts.push(wrapMessage(agentLabels(`wait ${w.id}`), w.on_what));
  }
  if (o.delivery.tick && o.items.tick) {
    parts.push(
      wrapMessage(
        runtimeLabels('system'),
        `Work item ${o.items.tick.id} is runnable (${o.delivery.tick.why}). Work on it: it is your note below.`,
      ),
    );
    parts.push(wrapMessage(agentLabels(`work item ${o.items.tick.id}`), o.describe(o.items.tick)));
  }
  parts.push(o.items.current ? 'Your current work item:' : 'You have no current work item.');
  if (o.items.current) parts.push(wrapMessage(agentLabels('current work item'), o.describe(o.items.current)));
  const others = o.items.open.filter((i) => i.id !== o.items.current?.id).slice(0, 10);
  if (others.length)
    parts.push(
      'Your other open work items:',
      wrapMessage(agentLabels('open work items'), others.map(o.describe).join('\n')),
    );
  if (o.memory) parts.push('Your working memory:', wrapMessage(agentLabels('working memory'), o.memory));
  return { system, user: parts.join('\n\n') };
}
