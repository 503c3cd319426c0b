import type pg from 'pg';
import { openItemsOf } from '../work/in-tx.ts';
import { WAIT_COLS, WaitRow } from './reads.ts';
import type { LifeSnapshot } from './scheduler.ts';

/**
 * What a living agent's scheduler step decides on (`decide`, src/life/scheduler.ts), read inside the
 * step's transaction with the agent's life row locked: its state, its turn and that turn's asynchronous
 * calls, undelivered messages, open waits and open work items.
 */
export async function readSnapshot(
  c: pg.PoolClient,
  instance: string,
  role: string,
  actor: string,
  turnBytes: number | undefined,
): Promise<LifeSnapshot> {
  const life = await c.query<{ state: 'running' | 'stopped'; last_ms: string | null; now_ms: string }>(
    `SELECT state, (EXTRACT(EPOCH FROM last_turn_at) * 1000)::bigint AS last_ms,
       (EXTRACT(EPOCH FROM now()) * 1000)::bigint AS now_ms
     FROM holt.agent_life WHERE instance = $1 AND role = $2 FOR UPDATE`,
    [instance, role],
  );
  const l = life.rows[0]!;
  const head = await c.query<{
    status: string;
    active_turn_id: string | null;
    live: boolean;
    exp_ms: string | null;
  }>(
    `SELECT status, active_turn_id, lease_expires_at > now() AS live,
       (EXTRACT(EPOCH FROM lease_expires_at) * 1000)::bigint AS exp_ms
     FROM holt.agent_state_head WHERE instance = $1 AND actor_id = $2`,
    [instance, actor],
  );
  const h = head.rows[0];
  let turn: LifeSnapshot['turn'] = null;
  if (h?.active_turn_id) {
    const tw = await c.query<{ tool_call_id: string; wait_status: string; deadline_ms: string | null }>(
      `SELECT tool_call_id, wait_status, (EXTRACT(EPOCH FROM resume_deadline) * 1000)::bigint AS deadline_ms
       FROM holt.turn_waiting_tools WHERE turn_id = $1 AND wait_status IN ('waiting', 'received')`,
      [h.active_turn_id],
    );
    turn = {
      id: h.active_turn_id,
      status: h.status === 'idle' ? 'dispatched' : (h.status as 'dispatched' | 'running' | 'suspended'),
      leaseLive: h.live === true,
      leaseExpiresMs: h.exp_ms === null ? null : Number(h.exp_ms),
      toolWaits: tw.rows.map((w) => ({
        toolCallId: w.tool_call_id,
        state: w.wait_status === 'received' ? 'received' : 'waiting',
        deadlineMs: w.deadline_ms === null ? null : Number(w.deadline_ms),
      })),
    };
  }
  const msgs = await c.query<{
    id: string;
    kind: 'message' | 'wake';
    origin: string;
    authority: string;
    bytes: number;
    priority: number;
  }>(
    `SELECT id, kind, labels->>'origin' AS origin, labels->>'authority' AS authority, octet_length(coalesce(body, '')) AS bytes, priority
     FROM holt.agent_messages
     WHERE instance = $1 AND role = $2 AND turn_id IS NULL ORDER BY priority DESC, id LIMIT 100`,
    [instance, role],
  );
  const waits = await c.query(
    `SELECT ${WAIT_COLS} FROM holt.agent_waits WHERE instance = $1 AND role = $2 AND state = 'waiting'`,
    [instance, role],
  );
  return {
    nowMs: Number(l.now_ms),
    state: l.state,
    turn,
    messages: msgs.rows.map((m) => ({
      id: String(m.id),
      kind: m.kind,
      origin: m.origin,
      authority: m.authority,
      bytes: Number(m.bytes),
      priority: Number(m.priority),
    })),
    ...(turnBytes ? { turnBytes } : {}),
    waits: waits.rows.map((r) => {
      const w = WaitRow.parse(r);
      return {
        id: w.id,
        kind: w.kind,
        itemId: w.item_id,
        deadlineMs: w.deadline_ms,
        ...(w.cancelled_by ? { cancelled: true } : {}),
      };
    }),
    items: await openItemsOf(c, instance, role),
    lastTurnMs: l.last_ms === null ? 0 : Number(l.last_ms),
  };
}
