import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../test/harness/browser.ts';
import { consoleLink } from '../test/harness/console-cli.ts';
import { eventually } from '../test/harness/wait.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * `holt console` on the demo through `holt up`'s real processes, in headless Chromium: the user opens
 * the link it printed and watches a workflow appear and complete, the page never reloaded. With
 * HOLT_UPDATE_PICTURES=1 the page is photographed into docs/img/console-workflows.png (the README's).
 */
const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const NAME = 'consoled';
const ASKING = 'consoleask';
const FIX = join(ROOT, 'test', 'fixtures', 'agents');
let asking: string;

let scratch: string;
let ws: string;
let env: NodeJS.ProcessEnv;
let browser: Browser | undefined;
const holt = (args: string[], cwd = ws) => run(HOLT, args, { cwd, env, maxBuffer: 20 << 20 });
const consoles: ChildProcessWithoutNullStreams[] = [];

/** `holt console --name <name>` started, and the link it printed. */
function openConsole(name: string): Promise<string> {
  const served = spawn(HOLT, ['console', '--name', name], { cwd: ws, env });
  consoles.push(served);
  return consoleLink(served);
}

async function chromium(): Promise<Browser> {
  browser ??= await launchChromium();
  return browser;
}

beforeAll(async () => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'console-'));
  ws = join(scratch, 'ws');
  cpSync(join(ROOT, 'examples', 'demo'), ws, { recursive: true });
  commitWorkspace(ws);
  // A Holt whose one agent asks a question about its goal, and finishes once it is answered.
  asking = join(scratch, 'asking');
  mkdirSync(asking);
  writeFileSync(
    join(asking, 'holt.yml'),
    `version: "2"
agents:
  Asker:
    command: ["node", "${join(FIX, 'asker.mjs')}"]
    bid_script: ["node", "${join(FIX, 'bid-types.mjs')}", "GoalDefined", "exclusive"]
`,
  );
  commitWorkspace(asking);
  env = { ...process.env, HOLT_HOME: join(scratch, 'home'), NO_COLOR: '1' };
});
afterAll(async () => {
  await browser?.close();
  for (const c of consoles) c.kill('SIGTERM');
  await holt(['down', '--name', NAME]).catch(() => undefined);
  await holt(['down', '--name', ASKING], asking).catch(() => undefined);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('holt console', () => {
  it('a user opens the printed link and watches the demo workflow appear and complete live', async () => {
    await holt(['up', '--name', NAME, '--timeout', '120']);
    const url = await openConsole(NAME);
    const page = await (await chromium()).newPage();
    await page.setViewport({ width: 1100, height: 420 });
    await page.goto(url);
    await page.waitForSelector('[data-conn="live"]');
    expect(await page.$$('tr[data-goal]')).toHaveLength(0);

    const forage = await holt(['forage', '--name', NAME, '--goal', 'a haiku for the console']);
    const goal = /[0-9a-f-]{36}/.exec(forage.stdout)?.[0];
    expect(goal).toBeDefined();
    const status = () =>
      page.$eval(`tr[data-goal="${goal}"]`, (tr) => tr.getAttribute('data-status')).catch(() => undefined);
    await eventually('the workflow listed', async () => (await status()) !== undefined, {
      timeoutMs: 30_000,
    });
    await eventually('the workflow completed, live', async () => (await status()) === 'completed', {
      timeoutMs: 120_000,
    });
    const cells = await page.$$eval(`tr[data-goal="${goal}"] td`, (tds) => tds.map((t) => t.textContent));
    expect(cells[0]).toBe('a haiku for the console');
    expect(Number(cells[3])).toBeGreaterThanOrEqual(7);
    expect(Number(cells[4])).toBe(1);
    const pictures = process.env.HOLT_UPDATE_PICTURES === '1';
    if (pictures) {
      mkdirSync(join(ROOT, 'docs', 'img'), { recursive: true });
      await page.screenshot({ path: join(ROOT, 'docs', 'img', 'console-workflows.png') });
    }
    // Its page: the timeline of its eight artefacts (the rejected draft, the review, the rework…).
    await page.click(`tr[data-goal="${goal}"] button`);
    await page.waitForSelector(`[data-workflow="${goal}"] img.graph`);
    const timeline = await page.$$eval(`[data-workflow="${goal}"] tr[data-artefact]`, (trs) => trs.length);
    expect(timeline).toBe(Number(cells[3]));
    if (pictures) {
      await page.setViewport({ width: 1100, height: 1300 });
      await page.waitForFunction(
        () =>
          ((
            globalThis as { document?: { querySelector(s: string): { naturalWidth: number } | null } }
          ).document?.querySelector('img.graph')?.naturalWidth ?? 0) > 0,
      );
      await page.screenshot({ path: join(ROOT, 'docs', 'img', 'console-workflow.png'), fullPage: true });
    }
  });

  it('a user answers a question in the page and sees the workflow finish', async () => {
    await holt(['up', '--name', ASKING, '--timeout', '120'], asking);
    const page = await (await chromium()).newPage();
    await page.goto(await openConsole(ASKING));
    await page.waitForSelector('[data-conn="live"][data-can-act="true"]');
    await holt(['forage', '--name', ASKING, '--goal', 'paint the shed'], asking);
    await page.click('[data-page="questions"]');
    await page.waitForSelector('[data-question]', { timeout: 60_000 });
    expect(await page.$eval('[data-question] .payload', (p) => p.textContent)).toBe(
      'Which colour for: paint the shed?',
    );
    await page.type('[data-question] textarea', 'green');
    await page.click('[data-question] [data-act="answer"]');
    await page.waitForSelector('[data-question]', { hidden: true });
    await page.click('[data-page="workflows"]');
    await page.waitForSelector('tr[data-status="completed"]', { timeout: 60_000 });
    const trail = (await holt(['hoard', '--name', ASKING, '-o', 'jsonl'], asking)).stdout;
    expect(trail).toContain('answer was: green');
  });
});
