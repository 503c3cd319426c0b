import type pg from 'pg';
import type { Blocker, WorkItem } from './items.ts';
import { ITEM_COLUMNS, itemOf } from './store.ts';

/**
 * Work item edits made inside another store's transaction (a living agent's scheduler step, its waits
 * and the failed turns it gives back): the one place, beside WorkStore, that writes `holt.work_items`.
 */

/** An agent's open items, as its scheduler's snapshot reads them. */
export async function openItemsOf(c: pg.PoolClient, instance: string, role: string): Promise<WorkItem[]> {
  const r = await c.query(
    `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE instance = $1 AND role = $2 AND state = 'open'`,
    [instance, role],
  );
  return r.rows.map(itemOf);
}

/** Adds one blocker to an open item (a wait's; `dropWaitBlocker` takes it away when the wait ends). */
export async function addBlocker(c: pg.PoolClient, itemId: string, b: Blocker): Promise<void> {
  await c.query(
    `UPDATE holt.work_items SET blocked_by = blocked_by || $2::jsonb, updated_at = now()
     WHERE id = $1 AND state = 'open'`,
    [itemId, JSON.stringify([b])],
  );
}

/** Takes away the blocker a wait put on an item (the wait ended). */
export async function dropWaitBlocker(c: pg.PoolClient, itemId: string, waitId: string): Promise<void> {
  const r = await c.query(`SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE id = $1 FOR UPDATE`, [itemId]);
  if (!r.rowCount) return;
  const left = itemOf(r.rows[0]).blockedBy.filter((b) => !(b.kind === 'wait' && b.waitId === waitId));
  await c.query('UPDATE holt.work_items SET blocked_by = $2::jsonb, updated_at = now() WHERE id = $1', [
    itemId,
    JSON.stringify(left),
  ]);
}

/** An item's recheck, once due, is taken by the turn that ticks it. */
export async function takeDueRecheck(c: pg.PoolClient, itemId: string): Promise<void> {
  await c.query('UPDATE holt.work_items SET recheck_at = NULL WHERE id = $1 AND recheck_at <= now()', [
    itemId,
  ]);
}
