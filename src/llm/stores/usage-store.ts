import type pg from 'pg';
import { z } from 'zod';
import { ms, tx } from '../../state/sql.ts';
import type { BudgetVerdict, Ledger } from '../model/budget.ts';
import type { Usage } from '../model/model.ts';

const UsageRow = z.object({ at_ms: z.coerce.number(), tokens: z.coerce.number(), cost: z.coerce.number() });

/**
 * The budget ledger of LLM agents (holt.llm_usage, rolled up in holt.llm_usage_totals): every model
 * call's usage and cost, reserved before the call and settled after it, shared by all pods of a role.
 */
export class UsageStore {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  async addUsage(
    instance: string,
    role: string,
    turnId: string | null,
    purpose: 'bid' | 'turn' | 'plan',
    u: Usage,
    costUsd: number,
  ): Promise<void> {
    await this.pool.query(
      `INSERT INTO holt.llm_usage (instance, role, turn_id, purpose, prompt_tokens, completion_tokens, total_tokens,
         cost_usd) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [instance, role, turnId, purpose, u.promptTokens, u.completionTokens, u.totalTokens, costUsd],
    );
  }

  /**
   * No debt across pods: under a per-role advisory lock, read the ledger, check, and record the call's
   * estimate before it is made. Concurrent callers of one role queue on the lock, so each sees the
   * others' reservations. `settle` replaces the estimate with the real usage afterwards.
   */
  reserve(
    instance: string,
    role: string,
    turnId: string | null,
    purpose: 'bid' | 'turn' | 'plan',
    windowMs: number,
    estimate: Usage,
    estimateCostUsd: number,
    check: (l: Ledger) => BudgetVerdict,
  ): Promise<{ verdict: BudgetVerdict; id?: string }> {
    return tx<{ verdict: BudgetVerdict; id?: string }>(this.pool, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `holt-budget/${instance}/${role}`,
      ]);
      const verdict = check(await this.ledgerOn(c, instance, role, windowMs));
      if (!verdict.ok) return { value: { verdict } };
      const r = await c.query<{ id: string }>(
        `INSERT INTO holt.llm_usage (instance, role, turn_id, purpose, prompt_tokens, completion_tokens, total_tokens,
           cost_usd) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
        [
          instance,
          role,
          turnId,
          purpose,
          estimate.promptTokens,
          estimate.completionTokens,
          estimate.totalTokens,
          estimateCostUsd,
        ],
      );
      return { value: { verdict, id: String(r.rows[0]?.id) } };
    });
  }

  /** The call's real usage replaces its reservation (a server that reports none keeps the estimate). */
  async settle(id: string, u: Usage, costUsd: number): Promise<void> {
    if (u.totalTokens <= 0) return;
    await this.pool.query(
      `UPDATE holt.llm_usage SET prompt_tokens = $2, completion_tokens = $3, total_tokens = $4, cost_usd = $5
       WHERE id = $1`,
      [id, u.promptTokens, u.completionTokens, u.totalTokens, costUsd],
    );
  }

  /** A call that never got a reply frees its reservation (errors are governed by their own backoff). */
  async cancel(id: string): Promise<void> {
    await this.pool.query('DELETE FROM holt.llm_usage WHERE id = $1', [id]);
  }

  /** The role's calls in the window (oldest first) and its total cost. */
  ledger(instance: string, role: string, windowMs: number): Promise<Ledger> {
    return this.ledgerOn(this.pool, instance, role, windowMs);
  }

  private async ledgerOn(
    q: pg.Pool | pg.PoolClient,
    instance: string,
    role: string,
    windowMs: number,
  ): Promise<Ledger> {
    const w = await q.query(
      `SELECT (EXTRACT(EPOCH FROM at) * 1000)::bigint AS at_ms, total_tokens AS tokens, cost_usd AS cost
       FROM holt.llm_usage WHERE instance = $1 AND role = $2 AND at > now() - $3::interval ORDER BY at`,
      [instance, role, ms(windowMs)],
    );
    // Rolled up as the ledger changes (migration usage_totals): one row, not every call ever made.
    const t = await q.query<{ total: string | null }>(
      'SELECT cost_usd AS total FROM holt.llm_usage_totals WHERE instance = $1 AND role = $2',
      [instance, role],
    );
    return {
      window: w.rows
        .map((x) => UsageRow.parse(x))
        .map((x) => ({ atMs: x.at_ms, tokens: x.tokens, costUsd: x.cost })),
      totalCostUsd: Number(t.rows[0]?.total ?? 0),
    };
  }
}
