import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../../test/harness/browser.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { artefact } from '../blackboard/testkit.ts';
import { silentLogger } from '../common/logger.ts';
import { createPool } from '../common/pg.ts';
import { labelsOf } from '../life/labels.ts';
import { LifeStore } from '../life/store.ts';
import { MemoryStore } from '../memory/store.ts';
import { ensureHead, ensureTurn } from '../state/head.ts';
import { migrate } from '../state/migrate.ts';
import { WorkStore } from '../work/store.ts';
import { type Console, startConsole } from './server.ts';

// The living agents page in headless Chromium, on a real Redis blackboard and a real Postgres: an
// agent's messages in their labels (a hostile body inert), its work item, and its wait cancelled from
// the page by a session that may act (a read-only one has no button).

let redis: RedisServer;
let postgres: PostgresServer;
let pool: pg.Pool;
let bb: Blackboard;
let con: Console;
let browser: Browser;
const I = 'living';

beforeAll(async () => {
  [redis, postgres] = await Promise.all([startRedis(), startPostgres()]);
  await migrate(postgres.url);
  pool = createPool(postgres.url, { max: 4 });
  bb = Blackboard.connect(redis.url, I);
  con = await startConsole({ bb, pool, log: silentLogger(), agentsPollMs: 200 });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await con?.close();
  await bb?.close();
  await pool?.end();
  await Promise.all([redis?.stop(), postgres?.stop()]);
});

async function signIn(c: Console): Promise<Page> {
  const p = await browser.newPage();
  await p.goto(c.url);
  await p.waitForSelector('[data-conn="live"]');
  await p.click('[data-page="living"]');
  return p;
}

/** The agent `Watcher`: a webhook's message delivered to a turn, which made a work item and set a wait. */
async function livingAgent(): Promise<{ waitId: string }> {
  const life = new LifeStore(pool);
  await life.enqueue({
    instance: I,
    role: 'Watcher',
    key: 'k1',
    kind: 'message',
    body: 'Build 7 started <img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>',
    labels: {
      ...labelsOf('webhook', 'message', 'POST /v1/agents/Watcher/messages', 'token ci'),
      priority: 3,
    },
  });
  const step = await life.step(I, 'Watcher', 'pod-1', 60_000);
  const f = step.fence!;
  const made = await new WorkStore(pool).create(f, 'Watcher', 'Report on build 7');
  if (!made.ok) throw new Error(made.error);
  const wait = await life.addWait(f, 'Watcher', {
    kind: 'operator',
    on: 'a go-ahead',
    itemId: made.value.id,
  });
  await life.finish(f, { status: 'done' });
  await new MemoryStore(pool).save({
    instance: I,
    role: 'Watcher',
    kind: 'observation',
    body: 'Build 7 flakes on <b>Tuesdays</b>',
    source: { kind: 'turn' },
    labels: labelsOf('webhook', 'message', 'POST /v1/agents/Watcher/messages', 'token ci'),
  });
  return { waitId: wait.id };
}

describe('the living agents page (headless Chromium, real Redis and Postgres)', () => {
  it("shows a living agent's messages, items and tasks; cancels its wait from the page", async () => {
    const { waitId } = await livingAgent();
    const p = await signIn(con);
    const row = `[data-living="Watcher"] tr[data-task="${waitId}"]`;
    await p.waitForSelector(`${row}[data-state="waiting"]`);
    // The message in its labels, as text: the markup is shown, never made.
    const msg = await p.$eval('[data-living="Watcher"] [data-message] .payload', (e) => e.textContent);
    expect(msg).toContain('<script>window.__pwned=1</script>');
    expect(await p.$$('[data-living="Watcher"] img, [data-living="Watcher"] script')).toHaveLength(0);
    expect(await p.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    // Its memories, as text.
    const memory = await p.$eval('[data-living="Watcher"] [data-memory]', (e) => e.textContent ?? '');
    expect(memory).toContain('observation · agent · external_evidence');
    expect(memory).toContain('Build 7 flakes on <b>Tuesdays</b>');
    const badge = await p.$eval('[data-living="Watcher"] [data-message] .badge', (e) => e.textContent);
    expect(badge).toBe('webhook · external_evidence · priority 3');
    expect(await p.$eval('[data-living="Watcher"] [data-item]', (e) => e.textContent)).toContain(
      'Report on build 7',
    );
    // A read-only session sees the task, and no button to cancel it.
    const ro = await startConsole({ bb, pool, log: silentLogger(), readOnly: true });
    try {
      const rp = await signIn(ro);
      await rp.waitForSelector(row);
      expect(await rp.$(`${row} [data-act="cancel"]`)).toBeNull();
      await rp.close();
    } finally {
      await ro.close();
    }
    await p.click(`${row} [data-act="cancel"]`);
    await p.waitForSelector(`${row}[data-state="cancelling"]`);
    const w = await pool.query('SELECT state, cancelled_by FROM holt.agent_waits WHERE id = $1', [waitId]);
    expect(w.rows[0]).toEqual({ state: 'waiting', cancelled_by: 'the console' });
    // The scheduler ends it at the agent's next step, and the page follows.
    const step = await new LifeStore(pool).step(I, 'Watcher', 'pod-1', 60_000);
    expect(step.delivery?.waits).toEqual([{ id: waitId, outcome: 'cancelled' }]);
    await p.waitForSelector(row, { hidden: true });
    await eventually('the decision shown', async () =>
      (await p.$$eval('[data-living="Watcher"] li', (ls) => ls.map((l) => l.textContent ?? ''))).some((t) =>
        t.includes('cancel: the console cancelled operator task'),
      ),
    );
    await p.close();
  });
});

describe("a workflow's timeline with the Holt's Postgres", () => {
  it('shows the model calls and tool runs of the turns that answered its claims', async () => {
    const goal = artefact({ type: 'GoalDefined', payload: 'Write the notes' });
    await bb.createArtefact(goal);
    const draft = artefact({ type: 'Draft', source_artefacts: [goal.id], produced_by_role: 'Drafter' });
    await bb.createArtefact(draft);
    const claimId = randomUUID();
    await bb.createClaim({
      id: claimId,
      artefact_id: draft.id,
      status: 'complete',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: 'Drafter',
    });
    const [actorId, turnId] = [randomUUID(), randomUUID()];
    await ensureHead(pool, { instance: I, actorId, role: 'Drafter', workerTarget: 'drafter', claimId });
    await ensureTurn(pool, {
      turnId,
      instance: I,
      actorId,
      claimId,
      role: 'Drafter',
      phase: 'exclusive',
      claimType: 'exclusive',
    });
    const step = (seq: number, kind: string, metadata: object) =>
      pool.query(
        `INSERT INTO holt.agent_steps (step_id, instance, actor_id, turn_id, turn_epoch, seq, kind, metadata)
         VALUES ($1, $2, $3, $4, 1, $5, $6, $7::jsonb)`,
        [randomUUID(), I, actorId, turnId, seq, kind, JSON.stringify(metadata)],
      );
    await step(0, 'llm', { model: 'scripted', llm_usage: { total_tokens: 120 } });
    await step(1, 'tool', { tool: 'read_file', outcome: 'ok' });
    // A console of its own (the shared one's one-time link is spent).
    const own = await startConsole({ bb, pool, log: silentLogger() });
    const p = await browser.newPage();
    await p.goto(own.url);
    await p.waitForSelector(`tr[data-goal="${goal.id}"] button`);
    await p.click(`tr[data-goal="${goal.id}"] button`);
    const steps = `[data-workflow="${goal.id}"] [data-steps="${draft.id}"]`;
    await p.waitForSelector(steps);
    const shown = await p.$$eval(`${steps} li`, (ls) =>
      ls.map((l) => [l.getAttribute('data-step'), l.textContent]),
    );
    expect(shown.map(([k]) => k)).toEqual(['model', 'tool']);
    expect(shown[0]![1]).toContain('Drafter model scripted (120 tokens)');
    expect(shown[1]![1]).toContain('Drafter tool read_file (ok)');
    await p.close();
    await own.close();
  });
});
