import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { FenceLostError } from '../common/errors.ts';
import type { Fence } from '../state/schema.ts';
import { holdsFence, tx } from '../state/sql.ts';
import { Blocker, completionProblem, PLAN_STATUSES, Todo, WorkItem } from './items.ts';

// A write of a turn is fenced like every other: the actor's head must still hold this epoch and turn
// (holdsFence, first in each write's transaction).

const Row = z.object({
  id: z.string(),
  instance: z.string(),
  role: z.string(),
  objective: z.string(),
  state: z.string(),
  plan_status: z.string(),
  todos: z.unknown(),
  blocked_by: z.unknown(),
  recheck_ms: z.coerce.number().nullable(),
  report: z.string().nullable(),
  created_ms: z.coerce.number(),
  updated_ms: z.coerce.number(),
});
export const ITEM_COLUMNS = `id, instance, role, objective, state, plan_status, todos, blocked_by, report,
  (EXTRACT(EPOCH FROM recheck_at) * 1000)::bigint AS recheck_ms,
  (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS created_ms,
  (EXTRACT(EPOCH FROM updated_at) * 1000)::bigint AS updated_ms`;

/** A stored row as a WorkItem; a row that does not parse (a hand-edited one) fails loudly, naming it. */
export function itemOf(raw: unknown): WorkItem {
  const r = Row.parse(raw);
  return WorkItem.parse({
    id: r.id,
    instance: r.instance,
    role: r.role,
    objective: r.objective,
    state: r.state,
    planStatus: r.plan_status,
    todos: r.todos,
    blockedBy: r.blocked_by,
    recheckAtMs: r.recheck_ms,
    report: r.report,
    createdAtMs: r.created_ms,
    updatedAtMs: r.updated_ms,
  });
}

/** What a turn may change of an item (the todo list is replaced whole). */
export const ItemPatch = z.object({
  objective: z.string().min(1).max(4000).optional(),
  planStatus: z.enum(PLAN_STATUSES).optional(),
  todos: z.array(Todo).max(100).optional(),
  blockedBy: z.array(Blocker).max(50).optional(),
  recheckAtMs: z.number().int().positive().nullable().optional(),
});
export type ItemPatch = z.input<typeof ItemPatch>;

export type Written<T> = { ok: true; value: T } | { ok: false; error: string };

/** An item leaves a role (finished, or handed on): its waits end and it is no longer the role's current one. */
export async function releaseItem(
  c: pg.PoolClient,
  instance: string,
  role: string,
  id: string,
): Promise<void> {
  await c.query(
    `UPDATE holt.agent_waits SET state = 'cancelled', ended_at = now() WHERE item_id = $1 AND state = 'waiting'`,
    [id],
  );
  await c.query('DELETE FROM holt.work_current WHERE instance = $1 AND role = $2 AND item_id = $3', [
    instance,
    role,
    id,
  ]);
}

/**
 * Work items in Postgres (holt.work_items, holt.work_current). Every write a turn makes is fenced; a
 * stale turn writes nothing (FenceLostError). Reads are for anyone (the turn, `holt work`, the operator).
 */
export class WorkStore {
  readonly pool: pg.Pool;
  readonly #opts: { maxOpen?: number; onFull?: () => void };
  /** `maxOpen`: the most open items a role may have (HOLT_LIFE_MAX_OPEN_ITEMS); `onFull`: told of each refusal. */
  constructor(pool: pg.Pool, opts: { maxOpen?: number; onFull?: () => void } = {}) {
    this.pool = pool;
    this.#opts = opts;
  }

  /**
   * A new open item of the role (a draft plan, no todos); it becomes the current one if there is none.
   * A role that has its most open items gets an error instead (the model is told to finish some first).
   */
  async create(f: Fence, role: string, objective: string): Promise<Written<WorkItem>> {
    const id = randomUUID();
    const max = this.#opts.maxOpen;
    return tx<Written<WorkItem>>(this.pool, async (c) => {
      if (!(await holdsFence(c, f))) throw new FenceLostError();
      if (max !== undefined) {
        // One creator of the role's items at a time, so two turns cannot both take the last place.
        await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`work:${f.instance}:${role}`]);
        const open = await c.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM holt.work_items WHERE instance = $1 AND role = $2 AND state = 'open'`,
          [f.instance, role],
        );
        if ((open.rows[0]?.n ?? 0) >= max) {
          this.#opts.onFull?.();
          return {
            value: {
              ok: false,
              error: `you already have ${max} open work items, the most you may have: complete the ones that are done (work_complete) before creating another`,
            },
          };
        }
      }
      const r = await c.query(
        `INSERT INTO holt.work_items (id, instance, role, objective, created_by_turn)
         VALUES ($1, $2, $3, $4, $5) RETURNING ${ITEM_COLUMNS}`,
        [id, f.instance, role, objective, f.turnId],
      );
      await c.query(
        'INSERT INTO holt.work_current (instance, role, item_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [f.instance, role, id],
      );
      return { value: { ok: true, value: itemOf(r.rows[0]) } };
    });
  }

  /** Changes an open item of the role; an unknown or finished item is an error the model is told. */
  async update(f: Fence, role: string, id: string, patch: ItemPatch): Promise<Written<WorkItem>> {
    const p = ItemPatch.parse(patch);
    return tx<Written<WorkItem>>(this.pool, async (c) => {
      if (!(await holdsFence(c, f))) throw new FenceLostError();
      const r = await c.query(
        `UPDATE holt.work_items SET
           objective = coalesce($4, objective),
           plan_status = coalesce($5, plan_status),
           todos = coalesce($6::jsonb, todos),
           blocked_by = coalesce($7::jsonb, blocked_by),
           recheck_at = CASE WHEN $8::boolean THEN to_timestamp($9::double precision / 1000) ELSE recheck_at END,
           updated_at = now()
         WHERE id = $1 AND instance = $2 AND role = $3 AND state = 'open'
         RETURNING ${ITEM_COLUMNS}`,
        [
          id,
          f.instance,
          role,
          p.objective ?? null,
          p.planStatus ?? null,
          p.todos ? JSON.stringify(p.todos) : null,
          p.blockedBy ? JSON.stringify(p.blockedBy) : null,
          p.recheckAtMs !== undefined,
          p.recheckAtMs ?? null,
        ],
      );
      if (!r.rowCount) return { value: { ok: false, error: `no open work item ${id} of ${role}` } };
      return { value: { ok: true, value: itemOf(r.rows[0]) } };
    });
  }

  /** Makes an open item the role's current one (at most one, kept across turns). */
  async pick(f: Fence, role: string, id: string): Promise<Written<WorkItem>> {
    return tx<Written<WorkItem>>(this.pool, async (c) => {
      if (!(await holdsFence(c, f))) throw new FenceLostError();
      const r = await c.query(
        `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE id = $1 AND instance = $2 AND role = $3 AND state = 'open'`,
        [id, f.instance, role],
      );
      if (!r.rowCount) return { value: { ok: false, error: `no open work item ${id} of ${role}` } };
      await c.query(
        `INSERT INTO holt.work_current (instance, role, item_id) VALUES ($1, $2, $3)
         ON CONFLICT (instance, role) DO UPDATE SET item_id = EXCLUDED.item_id`,
        [f.instance, role, id],
      );
      return { value: { ok: true, value: itemOf(r.rows[0]) } };
    });
  }

  /**
   * Completes an item in one transaction: its state and report, its blockers and waits cleared, and the role's
   * current item released if it was this one. A completion needs a report (completionProblem).
   */
  async complete(f: Fence, role: string, id: string, report: string): Promise<Written<WorkItem>> {
    return tx<Written<WorkItem>>(this.pool, async (c) => {
      if (!(await holdsFence(c, f))) throw new FenceLostError();
      const cur = await c.query(
        `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE id = $1 AND instance = $2 AND role = $3 FOR UPDATE`,
        [id, f.instance, role],
      );
      if (!cur.rowCount) return { value: { ok: false, error: `no work item ${id} of ${role}` } };
      const problem = completionProblem(itemOf(cur.rows[0]), report);
      if (problem) return { value: { ok: false, error: problem } };
      const r = await c.query(
        `UPDATE holt.work_items SET state = 'completed', report = $2, blocked_by = '[]', recheck_at = NULL,
           updated_at = now() WHERE id = $1 RETURNING ${ITEM_COLUMNS}`,
        [id, report.trim()],
      );
      // Its waits end with it: nothing wakes the agent for a finished item.
      await releaseItem(c, f.instance, role, id);
      return { value: { ok: true, value: itemOf(r.rows[0]) } };
    });
  }

  async get(instance: string, role: string, id: string): Promise<WorkItem | undefined> {
    const r = await this.pool.query(
      `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE id = $1 AND instance = $2 AND role = $3`,
      [id, instance, role],
    );
    return r.rowCount ? itemOf(r.rows[0]) : undefined;
  }

  /** The role's items, newest first (open ones only unless `all`). */
  async list(
    instance: string,
    role: string,
    opts: { all?: boolean; limit?: number } = {},
  ): Promise<WorkItem[]> {
    const r = await this.pool.query(
      `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE instance = $1 AND role = $2 AND ($3 OR state = 'open')
       ORDER BY created_at DESC LIMIT $4`,
      [instance, role, opts.all === true, opts.limit ?? 200],
    );
    return r.rows.map(itemOf);
  }

  /** Every role's items of an instance, newest first (open ones only unless `all`). */
  async listAll(instance: string, opts: { all?: boolean; limit?: number } = {}): Promise<WorkItem[]> {
    const r = await this.pool.query(
      `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE instance = $1 AND ($2 OR state = 'open')
       ORDER BY created_at DESC LIMIT $3`,
      [instance, opts.all === true, opts.limit ?? 500],
    );
    return r.rows.map(itemOf);
  }

  /** An item by id or id prefix (as `holt work show` takes it); undefined when none or several match. */
  async find(instance: string, idOrPrefix: string): Promise<WorkItem | undefined> {
    const r = await this.pool.query(
      `SELECT ${ITEM_COLUMNS} FROM holt.work_items WHERE instance = $1 AND id::text LIKE $2 || '%' LIMIT 2`,
      [instance, idOrPrefix.toLowerCase().replace(/[^0-9a-f-]/g, '')],
    );
    return r.rowCount === 1 ? itemOf(r.rows[0]) : undefined;
  }

  /** The role's current item, if it has one. */
  async current(instance: string, role: string): Promise<WorkItem | undefined> {
    const r = await this.pool.query(
      `SELECT ${ITEM_COLUMNS} FROM holt.work_items
       WHERE id = (SELECT item_id FROM holt.work_current WHERE instance = $1 AND role = $2)`,
      [instance, role],
    );
    return r.rowCount ? itemOf(r.rows[0]) : undefined;
  }
}
