import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LlmServer, startLlmServer, text } from '../../../test/harness/llm.ts';
import { type PostgresServer, startPostgres } from '../../../test/harness/postgres.ts';
import { silentLogger } from '../../common/logger.ts';
import { createPool } from '../../common/pg.ts';
import { migrate } from '../../state/migrate.ts';
import { loadLlmSettings } from '../config.ts';
import { UsageStore } from '../stores/usage-store.ts';
import { LlmAgent, PausedError } from './agent.ts';
import { OpenAiModel } from './model.ts';

let postgres: PostgresServer;
let llm: LlmServer;
let pool: ReturnType<typeof createPool>;
let store: UsageStore;

beforeAll(async () => {
  [postgres, llm] = await Promise.all([startPostgres(), startLlmServer()]);
  await migrate(postgres.url, silentLogger());
  pool = createPool(postgres.url, { max: 8 });
  store = new UsageStore(pool);
});
afterAll(async () => {
  await pool?.end();
  await Promise.all([llm?.close(), postgres?.stop()]);
});

/** One pod's view of a role: its own LlmAgent over the role's shared Postgres ledger. */
function pod(role: string, budget: Record<string, string>): LlmAgent {
  const settings = loadLlmSettings({
    HOLT_LLM_BID: 'true',
    HOLT_LLM_BASE_URL: llm.url,
    HOLT_LLM_MODEL: 'scripted',
    HOLT_LLM_MAX_RETRIES: '0',
    ...budget,
  })!;
  const model = new OpenAiModel({
    baseUrl: settings.baseUrl,
    model: settings.model ?? 'scripted',
    maxTokens: settings.maxTokens,
    maxRetries: 0,
    timeoutMs: 10_000,
  });
  return new LlmAgent({ instance: 'shared', role, settings, model, usage: store, log: silentLogger() });
}

const ask = { messages: [{ role: 'user' as const, content: 'bid?' }] };

describe('budgets shared by every pod of a role: no debt', () => {
  it('two pods racing for the last call of the window: exactly one call reaches the model', async () => {
    llm.reset([text('one'), text('two')]);
    const a = pod('Racer', { HOLT_BUDGET_CALLS: '1' });
    const b = pod('Racer', { HOLT_BUDGET_CALLS: '1' });
    const results = await Promise.allSettled([a.call('bid', null, ask), b.call('bid', null, ask)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const refused = results.find((r) => r.status === 'rejected');
    expect(refused?.status === 'rejected' && refused.reason).toBeInstanceOf(PausedError);
    expect(String(refused?.status === 'rejected' && refused.reason)).toMatch(/call budget exhausted/);
    expect(llm.requests).toHaveLength(1);
  });

  it('a server that reports no usage is charged the estimate, so a token budget still binds', async () => {
    llm.reset([{ text: 'free?', usage: { prompt_tokens: 0, completion_tokens: 0 } }, text('again')]);
    const a = pod('Frugal', { HOLT_LLM_MAX_TOKENS: '100', HOLT_BUDGET_TOKENS: '150' });
    await a.call('bid', null, ask);
    const l = await store.ledger('shared', 'Frugal', 3_600_000);
    expect(l.window).toHaveLength(1);
    expect(l.window[0]?.tokens).toBeGreaterThanOrEqual(100);
    // The second call's estimate (>= 100 reply tokens) no longer fits in 150.
    await expect(a.call('bid', null, ask)).rejects.toThrow(/token budget exhausted/);
    expect(llm.requests).toHaveLength(1);
  });

  it('a call that fails frees its reservation', async () => {
    llm.reset([{ status: 500 }, text('ok')]);
    const a = pod('Flaky', { HOLT_BUDGET_CALLS: '1' });
    await expect(a.call('bid', null, ask)).rejects.toThrow();
    expect((await store.ledger('shared', 'Flaky', 3_600_000)).window).toHaveLength(0);
  });
});

describe('usage totals', () => {
  it('rolled up through reservations, settlements and cancellations; pruning old calls keeps the total', async () => {
    const u = (n: number) => ({ promptTokens: n, completionTokens: 0, totalTokens: n });
    const ok = () => ({ ok: true as const });
    const r1 = await store.reserve('totals', 'R', null, 'turn', 60_000, u(100), 0.5, ok);
    const r2 = await store.reserve('totals', 'R', null, 'turn', 60_000, u(100), 0.5, ok);
    await store.settle(r1.id!, u(40), 0.25);
    await store.cancel(r2.id!);
    await store.addUsage('totals', 'R', null, 'bid', u(10), 0.125);
    await store.addUsage('totals', 'Other', null, 'bid', u(10), 9);
    const sum = async () =>
      Number(
        (
          await pool.query(
            `SELECT sum(cost_usd) AS s FROM holt.llm_usage WHERE instance = 'totals' AND role = 'R'`,
          )
        ).rows[0].s,
      );
    expect(await sum()).toBe(0.375);
    expect((await store.ledger('totals', 'R', 60_000)).totalCostUsd).toBe(0.375);
    // Retention drops the old rows (the window no longer has them); the all-time total stays.
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      await c.query(`SET LOCAL holt.pruning = 'on'`);
      await c.query(`DELETE FROM holt.llm_usage WHERE instance = 'totals'`);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    const after = await store.ledger('totals', 'R', 60_000);
    expect(after.window).toEqual([]);
    expect(after.totalCostUsd).toBe(0.375);
    expect((await store.ledger('totals', 'Other', 60_000)).totalCostUsd).toBe(9);
  });
});
