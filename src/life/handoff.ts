import type pg from 'pg';
import { FenceLostError } from '../common/errors.ts';
import type { Fence } from '../state/schema.ts';
import { holdsFence, tx } from '../state/sql.ts';
import type { WorkItem } from '../work/items.ts';
import { ITEM_COLUMNS, itemOf, releaseItem, type Written } from '../work/store.ts';
import { ensureLifeRow } from './enqueue.ts';
import type { Labels } from './labels.ts';

/**
 * A work item handed, open and unfinished, to another living agent of the Holt (`work_handoff`): in
 * one fenced transaction the item becomes the other agent's (its todos and plan with it; its waits
 * cancelled, the giver's current item released), the other agent gets a message saying so with the
 * giver's note, and both agents' audit trails record it. The message's labels are the runtime's: from
 * another agent, a signal to weigh, never an instruction (a database trigger holds the pup to exactly
 * these, migration 1767225601400_handoffs).
 */

export const handoffLabels = (from: string): Labels => ({
  origin: 'agent',
  surface: `work_handoff from ${from}`,
  admission: `agent ${from}`,
  authority: 'integration_signal',
});

export async function handOff(
  pool: pg.Pool,
  f: Fence,
  from: string,
  itemId: string,
  to: string,
  note: string,
): Promise<Written<WorkItem>> {
  if (to === from) return { ok: false, error: 'a work item cannot be handed to its own agent' };
  return tx<Written<WorkItem>>(pool, async (c) => {
    if (!(await holdsFence(c, f))) throw new FenceLostError();
    const cur = await c.query(
      `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE id = $1 AND instance = $2 AND role = $3 FOR UPDATE`,
      [itemId, f.instance, from],
    );
    if (!cur.rowCount) return { value: { ok: false, error: `no work item ${itemId} of ${from}` } };
    const item = itemOf(cur.rows[0]);
    if (item.state !== 'open') return { value: { ok: false, error: `work item ${itemId} is ${item.state}` } };
    const life = await c.query<{ state: string }>(
      'SELECT state FROM holt.agent_life WHERE instance = $1 AND role = $2',
      [f.instance, to],
    );
    if (life.rows[0]?.state !== 'running')
      return {
        value: {
          ok: false,
          error: `${to} is not a running living agent of this Holt${life.rows[0] ? ' (it is stopped)' : ''}`,
        },
      };
    const moved = await c.query(
      `UPDATE holt.work_items SET role = $2, blocked_by = '[]', recheck_at = NULL, updated_at = now()
       WHERE id = $1 RETURNING ${ITEM_COLUMNS}`,
      [itemId, to],
    );
    await releaseItem(c, f.instance, from, itemId);
    await ensureLifeRow(c, f.instance, to);
    await c.query(
      `INSERT INTO holt.agent_messages (instance, role, idempotency_key, kind, body, labels)
       VALUES ($1, $2, $3, 'message', $4, $5::jsonb) ON CONFLICT (instance, role, idempotency_key) DO NOTHING`,
      [
        f.instance,
        to,
        `handoff:${itemId}:${f.turnId}`,
        `Work item ${itemId} is now yours, handed over by ${from} unfinished: "${item.objective}". Their note: ${note}`,
        JSON.stringify(handoffLabels(from)),
      ],
    );
    const detail = (d: Record<string, string>) => JSON.stringify({ item_id: itemId, ...d });
    await c.query(
      `INSERT INTO holt.life_audit (instance, role, decision, detail)
       VALUES ($1, $2, 'handoff_out', $4::jsonb), ($1, $3, 'handoff_in', $5::jsonb)`,
      [f.instance, from, to, detail({ to, note }), detail({ from, note })],
    );
    return { value: { ok: true, value: itemOf(moved.rows[0]) } };
  });
}
