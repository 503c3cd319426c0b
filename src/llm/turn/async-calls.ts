import { CancelledResult } from '../../life/tasks.ts';
import type { ToolCall } from '../model/model.ts';
import type { Tool, TurnScope } from './scope.ts';

/** An asynchronous tool: its request out (after its wait row), the turn suspends until it answers. */
export async function request(
  t: TurnScope,
  call: ToolCall,
  tool: Tool,
  args: Record<string, unknown>,
): Promise<void> {
  const { deps } = t;
  const ctl = t.state.ctl;
  if (!deps.life)
    return t.record(
      'tool',
      [t.toolMsg(call, `error: ${tool.name} is asynchronous; only a living agent's turns can wait for it`)],
      t.outputError(ctl, 'async tool outside a life turn'),
      { tool: tool.name, outcome: 'refused' },
      [call.id],
    );
  const sent = await deps.life.request(call.id, tool, args);
  deps.log.info({
    event_type: 'tool_requested',
    tool: tool.name,
    tool_call_id: call.id,
    deadline_ms: sent.deadlineMs,
  });
  await t.record(
    'tool_wait',
    [],
    {
      ...ctl,
      outputErrors: 0,
      toolWaits: [...ctl.toolWaits, { toolCallId: call.id, tool: tool.name, deadlineMs: sent.deadlineMs }],
    },
    { tool: tool.name, outcome: 'requested', deadline_ms: sent.deadlineMs },
    [call.id],
  );
}

/**
 * The asynchronous calls the turn waits for: each received result becomes the call's tool message,
 * each call past its deadline a timeout report (never silence). Returns when to look again while
 * some are still out, or undefined once a step was recorded.
 */
export async function collect(t: TurnScope): Promise<number | undefined> {
  const { deps } = t;
  const ctl = t.state.ctl;
  const rows = new Map((await deps.steps.toolWaits(deps.fence.turnId)).map((r) => [r.toolCallId, r]));
  const now = Date.now();
  for (const w of ctl.toolWaits) {
    const r = rows.get(w.toolCallId);
    const got = r?.status === 'received';
    if (!got && now < w.deadlineMs) continue;
    const content = got
      ? deps.scrub.text(deps.life ? deps.life.showResult(w.tool, r.result) : JSON.stringify(r.result))
      : `error: ${w.tool} gave no result within its deadline (${new Date(w.deadlineMs).toISOString()}): this is a timeout report, not an answer. Go on without it, or call ${w.tool} again.`;
    await deps.steps.settleTool(deps.fence, w.toolCallId, got ? 'applied' : 'expired');
    await t.record(
      'tool',
      [{ role: 'tool', tool_call_id: w.toolCallId, content }],
      { ...ctl, toolWaits: ctl.toolWaits.filter((x) => x.toolCallId !== w.toolCallId) },
      {
        tool: w.tool,
        outcome: got ? (CancelledResult.safeParse(r.result).success ? 'cancelled' : 'ok') : 'timed_out',
      },
      [w.toolCallId],
    );
    return undefined;
  }
  return Math.min(...ctl.toolWaits.map((w) => w.deadlineMs));
}
