// The console's latency: the time from an artefact written to the blackboard to a page showing it.

// A real Redis, the console server (src/console/server.ts) and headless Chromium with the workflows
// page open; `--workflows` goals are created one after another (each followed by a Draft and, for the
// last of each ten, a Terminal), and a MutationObserver in the page stamps when each row appears or
// changes status. Prints JSON: p50/p99/max of the write → page times (the same machine's clock), the
// page weight, and how many updates the page got. Usage: node bench/console/main.ts [--workflows 200]
import { parseArgs } from 'node:util';
import { Blackboard } from '../../src/blackboard/client.ts';
import { artefact } from '../../src/blackboard/testkit.ts';
import { silentLogger } from '../../src/common/logger.ts';
import { consoleAssets, pageWeight } from '../../src/console/assets.ts';
import { startConsole } from '../../src/console/server.ts';
import { launchChromium } from '../../test/harness/browser.ts';
import { startRedis } from '../../test/harness/redis.ts';
import { pct, round } from '../lib/proc.ts';

const { values } = parseArgs({ options: { workflows: { type: 'string', default: '200' } } });
const N = Number(values.workflows);
const log = (s: string) => process.stderr.write(`${s}\n`);

const redis = await startRedis();
const bb = Blackboard.connect(redis.url, 'bench-console');
const con = await startConsole({ bb, log: silentLogger() });
const browser = await launchChromium();
try {
  const page = await browser.newPage();
  await page.goto(con.url);
  await page.waitForSelector('[data-conn="live"]');
  // Each row's appearance and each status change, stamped on the page's clock (epoch ms).
  await page.evaluate(() => {
    const g = globalThis as unknown as {
      seen: Record<string, number>;
      document: { body: unknown; querySelectorAll(s: string): { getAttribute(a: string): string | null }[] };
      MutationObserver: new (cb: () => void) => { observe(n: unknown, o: unknown): void };
      performance: { timeOrigin: number; now(): number };
    };
    g.seen = {};
    new g.MutationObserver(() => {
      const at = g.performance.timeOrigin + g.performance.now();
      for (const tr of g.document.querySelectorAll('tr[data-goal]')) {
        const key = `${tr.getAttribute('data-goal')}:${tr.getAttribute('data-status')}`;
        if (!(key in g.seen)) g.seen[key] = at;
      }
    }).observe(g.document.body, { subtree: true, childList: true, attributes: true });
  });
  const written: { key: string; at: number }[] = [];
  for (let i = 0; i < N; i++) {
    const goal = artefact({ type: 'GoalDefined', payload: `bench goal ${i}` });
    written.push({ key: `${goal.id}:running`, at: Date.now() });
    await bb.createArtefact(goal);
    await bb.createArtefact(artefact({ type: 'Draft', source_artefacts: [goal.id], payload: 'draft' }));
    if (i % 10 === 9) {
      written.push({ key: `${goal.id}:completed`, at: Date.now() });
      await bb.createArtefact(
        artefact({ type: 'Done', structural_type: 'Terminal', source_artefacts: [goal.id] }),
      );
    }
    if (i % 50 === 49) log(`${i + 1} of ${N} workflows written`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const deadline = Date.now() + 30_000;
  let seen: Record<string, number> = {};
  while (Date.now() < deadline) {
    seen =
      (await page.evaluate(() => (globalThis as unknown as { seen: Record<string, number> }).seen)) ?? {};
    if (written.every((w) => w.key in seen)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const lat = written.filter((w) => w.key in seen).map((w) => Math.max(0, (seen[w.key] ?? 0) - w.at));
  const result = {
    workflows: N,
    updates: written.length,
    shown: lat.length,
    write_to_page_ms: { p50: round(pct(lat, 50)), p99: round(pct(lat, 99)), max: round(Math.max(...lat)) },
    page_weight_bytes: pageWeight(consoleAssets()),
  };
  log(
    `write → page: p50 ${result.write_to_page_ms.p50} ms, p99 ${result.write_to_page_ms.p99} ms (${lat.length} of ${written.length} updates)`,
  );
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await browser.close();
  await con.close();
  await bb.close();
  await redis.stop();
}
