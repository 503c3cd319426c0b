import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../../test/harness/browser.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { writeAgentStatus } from '../blackboard/agent-status.ts';
import { Blackboard } from '../blackboard/client.ts';
import { setAgents } from '../blackboard/registry.ts';
import { failurePayload } from '../blackboard/results.ts';
import { artefact } from '../blackboard/testkit.ts';
import { silentLogger } from '../common/logger.ts';
import { consoleAssets, pageWeight } from './assets.ts';
import { type Console, CSP, startConsole, traceLink } from './server.ts';
import { answerCard, answerFromScript, answersTo, askQuestion, openQuestion } from './testkit.ts';

// The console in headless Chromium against a real Redis blackboard: a workflow watched live, a
// hostile payload rendered inert, and no way in without the one-time token.

let redis: RedisServer;
let bb: Blackboard;
let con: Console;
let browser: Browser;

beforeAll(async () => {
  redis = await startRedis();
  bb = Blackboard.connect(redis.url, 'console');
  con = await startConsole({
    bb,
    log: silentLogger(),
    backstopMs: 500,
    agentsPollMs: 200,
    tracesUrl: 'http://jaeger.example:16686/',
  });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await con?.close();
  await bb?.close();
  await redis?.stop();
});

const base = () => new URL(con.url).origin;

/** A browser tab signed in with the console's one-time link. */
let signedIn: Page | undefined;
/**
 * Opens an artefact's payload from its timeline button: clicked again until the viewer shows, as a click
 * that lands while the page re-renders the timeline (its workflow's row changed) goes to a node just
 * replaced, and is lost.
 */
async function openPayload(p: Page, button: string, id: string) {
  return eventually(`the payload of ${id} open`, async () => {
    await p.click(button);
    return (
      (await p.waitForSelector(`[data-open="${id}"] pre`, { timeout: 2000 }).catch(() => null)) ?? undefined
    );
  });
}

async function page(): Promise<Page> {
  if (signedIn) return signedIn;
  const p = await browser.newPage();
  await p.goto(con.url);
  await p.waitForSelector('[data-conn="live"]');
  signedIn = p;
  return p;
}

const rowStatus = (p: Page, goal: string) =>
  p.$eval(`tr[data-goal="${goal}"]`, (tr) => tr.getAttribute('data-status')).catch(() => undefined);

describe('holt console (headless Chromium, real Redis)', () => {
  it('a user watches a workflow progress live: it appears, runs, and completes without a reload', async () => {
    const p = await page();
    const goal = artefact({ type: 'GoalDefined', payload: 'Write a haiku about the sea' });
    await bb.createArtefact(goal);
    await eventually('the workflow listed, running', async () => (await rowStatus(p, goal.id)) === 'running');
    const draft = artefact({ type: 'Draft', source_artefacts: [goal.id], payload: 'waves' });
    await bb.createArtefact(draft);
    await bb.createArtefact(
      artefact({ type: 'WorkflowComplete', structural_type: 'Terminal', source_artefacts: [draft.id] }),
    );
    await eventually('the workflow completed', async () => (await rowStatus(p, goal.id)) === 'completed');
    const cells = await p.$$eval(`tr[data-goal="${goal.id}"] td`, (tds) => tds.map((t) => t.textContent));
    expect(cells.slice(0, 4)).toEqual([
      'Write a haiku about the sea',
      'GoalDefined',
      'completed (WorkflowComplete)',
      '3',
    ]);
  });

  it("a workflow's page: its graph, the timeline of its artefacts with their claims, a payload opened", async () => {
    const p = await page();
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const goal = artefact({
      type: 'GoalDefined',
      payload: 'Draw the workflow page',
      traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
    });
    await bb.createArtefact(goal);
    const draft = artefact({
      type: 'Draft',
      source_artefacts: [goal.id],
      payload: 'a first draft',
      produced_by_role: 'Drafter',
    });
    await bb.createArtefact(draft);
    // The agents' bids on the draft's claim, shown in its timeline row.
    const claimId = '9a8b7c6d-0000-4000-8000-000000000001';
    await bb.createClaim({
      id: claimId,
      artefact_id: draft.id,
      status: 'pending_review',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: '',
    });
    await bb.setBid(claimId, 'Reviewer', 'review');
    await bb.setBid(claimId, 'Drafter', 'ignore');
    await p.waitForSelector(`tr[data-goal="${goal.id}"] button`);
    await p.click(`tr[data-goal="${goal.id}"] button`);
    const page_ = `[data-workflow="${goal.id}"]`;
    await p.waitForSelector(`${page_} [data-artefact="${draft.id}"]`);
    // The graph is an image of Graphviz's SVG, loaded.
    await p.waitForFunction(
      (sel: string) =>
        ((
          globalThis as {
            document?: { querySelector(s: string): { complete: boolean; naturalWidth: number } | null };
          }
        ).document?.querySelector(sel)?.naturalWidth ?? 0) > 0,
      {},
      `${page_} img.graph`,
    );
    const rows = await p.$$eval(`${page_} tr[data-artefact]`, (trs) =>
      trs.map((tr) => tr.getAttribute('data-artefact')),
    );
    expect(rows).toEqual([goal.id, draft.id]);
    const bids = await p.$eval(`${page_} tr[data-artefact="${draft.id}"] [data-bids]`, (d) => d.textContent);
    expect(bids?.split(': ')[1]?.split(', ').sort()).toEqual(['Drafter ignore', 'Reviewer review']);
    // Its trace id links to the trace viewer the console was given (a new tab, no referrer).
    const link = await p.$eval(`${page_} a[data-trace]`, (a) => [
      a.getAttribute('href'),
      a.getAttribute('rel'),
    ]);
    expect(link).toEqual([`http://jaeger.example:16686/trace/${traceId}`, 'noopener noreferrer']);
    // A new artefact of this workflow shows up on its page by itself.
    const review = artefact({
      type: 'Review',
      structural_type: 'Review',
      source_artefacts: [draft.id],
      payload: '{}',
    });
    await bb.createArtefact(review);
    await p.waitForSelector(`${page_} [data-artefact="${review.id}"]`);
    const viewer = await openPayload(p, `${page_} [data-artefact="${draft.id}"] button`, draft.id);
    expect(await viewer!.evaluate((pre) => pre.textContent)).toBe('a first draft');
    // The graph's own answer keeps the policy: nothing can run in it even opened on its own.
    const [cookie] = await p.cookies();
    const svg = await fetch(`${base()}/api/workflows/${goal.id}/graph.svg`, {
      headers: { cookie: `${cookie!.name}=${cookie!.value}` },
    });
    expect([svg.status, svg.headers.get('content-type'), svg.headers.get('content-security-policy')]).toEqual(
      [200, 'image/svg+xml', CSP],
    );
    expect(await svg.text()).toContain('<svg');
    // A Failure opens with its stderr as written (not JSON escapes), and its reason and class.
    const failure = artefact({
      type: 'ToolExecutionFailure',
      structural_type: 'Failure',
      source_artefacts: [review.id],
      produced_by_role: 'Drafter',
      payload: failurePayload({
        reason: 'exit code 2',
        exit_code: 2,
        stdout: '',
        stderr: 'make: *** [all] Error 2\n<b>not bold</b>',
        error_class: 'tool',
      }),
    });
    await bb.createArtefact(failure);
    await p.waitForSelector(`${page_} [data-artefact="${failure.id}"]`);
    const fv = await openPayload(p, `${page_} [data-artefact="${failure.id}"] button`, failure.id);
    expect(fv).toBeTruthy();
    const stderr = await p.$eval(`[data-open="${failure.id}"] [data-stderr]`, (pre) => pre.textContent);
    expect(stderr).toBe('make: *** [all] Error 2\n<b>not bold</b>');
    expect(await p.$eval(`[data-open="${failure.id}"] [data-failure]`, (d) => d.textContent)).toContain(
      'exit code 2',
    );
    await p.click(`${page_} button.link`);
  });

  it('renders a hostile payload as inert text: no script runs, no link or image is made', async () => {
    const p = await page();
    const hostile =
      '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"><a href="javascript:window.pwned=3">click</a>';
    const goal = artefact({ payload: hostile });
    await bb.createArtefact(goal);
    await eventually('the hostile goal listed', async () => (await rowStatus(p, goal.id)) === 'running');
    // The goal's text inside its one button (which opens the workflow), and nothing else made of it.
    const cell = await p.$eval(`tr[data-goal="${goal.id}"] td.goal`, (td) => ({
      text: td.textContent,
      elements: [...td.querySelectorAll('*')].map((e) => e.tagName),
    }));
    expect(cell).toEqual({ text: hostile, elements: ['BUTTON'] });
    // Opened, the workflow shows the payload in its viewer: text again.
    await p.click(`tr[data-goal="${goal.id}"] td.goal button`);
    await p.waitForSelector(`[data-workflow="${goal.id}"] [data-artefact="${goal.id}"] button`);
    const viewer = await openPayload(
      p,
      `[data-workflow="${goal.id}"] [data-artefact="${goal.id}"] button`,
      goal.id,
    );
    expect(await viewer!.evaluate((pre) => [pre.textContent, pre.children.length])).toEqual([hostile, 0]);
    expect(await p.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    expect(await p.$$('a[href^="javascript:"]')).toHaveLength(0);
    await p.click('[data-workflow] button.link'); // back to the list
  });

  it('refuses a request without the token; the token works once; every answer carries the CSP', async () => {
    const p = await page(); // signed in: the one-time token is spent
    const noSession = await fetch(`${base()}/api/workflows`);
    expect(noSession.status).toBe(401);
    expect(noSession.headers.get('content-security-policy')).toBe(CSP);
    expect((await fetch(`${base()}/?token=wrong`, { redirect: 'manual' })).status).toBe(401);
    // The token was traded by the browser above: it is spent.
    const again = await fetch(con.url, { redirect: 'manual' });
    expect(again.status).toBe(401);
    expect(await again.text()).toMatch(/used or is wrong/);
    expect((await fetch(`${base()}/api/workflows`, { method: 'POST' })).status).toBe(401);
    // No inline script in the page: the policy would refuse it.
    const html = await p.content();
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
  });

  it('links a trace only to an http(s) viewer, and only a well-formed trace id', () => {
    const id = '4bf92f3577b34da6a3ce929d0e0e4736';
    expect(traceLink('https://traces.example/jaeger/', id)).toBe(`https://traces.example/jaeger/trace/${id}`);
    expect(traceLink('javascript:alert(1)//', id)).toBeUndefined();
    expect(traceLink('https://traces.example', '"><script>')).toBeUndefined();
    expect(traceLink(undefined, id)).toBeUndefined();
  });

  it('ships a small page', () => {
    const bytes = pageWeight(consoleAssets());
    expect(bytes).toBeGreaterThan(10_000);
    expect(bytes).toBeLessThan(60_000);
  });

  it("answers a question from the page: the Answer is a person's, and the question leaves the list", async () => {
    const p = await page();
    const goal = artefact({ payload: 'ask me' });
    await bb.createArtefact(goal);
    const q = await askQuestion(bb, 'Which branch should I use?', [goal.id]);
    const card = await openQuestion(p, q.id);
    // Its context: what it cites (the goal here), opened as text.
    await p.click(`${card} [data-source="${goal.id}"] button`);
    const cited = await p.waitForSelector(`${card} [data-source="${goal.id}"] pre`);
    expect(await cited!.evaluate((pre) => pre.textContent)).toBe('ask me');
    await answerCard(p, card, 'main, please');
    const answers = await answersTo(bb, q.id);
    expect(answers).toEqual([expect.objectContaining({ payload: 'main, please', produced_by_role: 'user' })]);
  });

  it('approves a tool call from the page', async () => {
    const p = await page();
    const q = artefact({
      structural_type: 'Question',
      type: 'ApprovalRequest',
      payload: 'Approve: run deploy.sh --prod',
      produced_by_role: 'Deployer',
    });
    await bb.createArtefact(q);
    await p.click('[data-page="questions"]');
    const card = `[data-question="${q.id}"]`;
    await p.waitForSelector(`${card} [data-act="approve"]`);
    await p.click(`${card} [data-act="approve"]`);
    await p.waitForSelector(card, { hidden: true });
    const [a] = (await bb.getArtefacts(await bb.listArtefactIds())).filter(
      (x) => x?.structural_type === 'Answer' && x.source_artefacts.includes(q.id),
    );
    expect(a).toMatchObject({ payload: 'approve', produced_by_role: 'user' });
  });

  it('refuses an action without the CSRF token, from another origin, or from a read-only session', async () => {
    const p = await page();
    const q = artefact({ structural_type: 'Question', type: 'Question', payload: 'still open?' });
    await bb.createArtefact(q);
    // From the signed-in page itself, but without the header, or claiming another origin.
    const statuses = await p.evaluate(async (id: string) => {
      const s = (await (await fetch('/api/session')).json()) as { csrf: string };
      const send = (headers: Record<string, string>) =>
        fetch(`/api/questions/${id}/answer`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ text: 'yes' }),
        }).then((r) => r.status);
      return [
        await send({}),
        await send({ 'x-holt-csrf': 'forged' }),
        await send({ 'x-holt-csrf': s.csrf, 'content-type': 'text/plain' }),
      ];
    }, q.id);
    expect(statuses).toEqual([403, 403, 415]);
    // With the session and its token, but from a page of another origin (a browser sends its Origin).
    const [cookie] = await p.cookies();
    const csrf = await p.evaluate(
      async () => ((await (await fetch('/api/session')).json()) as { csrf: string }).csrf,
    );
    const cross = await fetch(`${base()}/api/questions/${q.id}/answer`, {
      method: 'POST',
      headers: {
        cookie: `${cookie!.name}=${cookie!.value}`,
        'x-holt-csrf': csrf,
        origin: 'http://evil.example',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ text: 'yes' }),
    });
    expect(cross.status).toBe(403);
    // A read-only console: its page offers no action, and the server refuses one.
    const ro = await startConsole({ bb, log: silentLogger(), readOnly: true });
    try {
      const rp = await browser.newPage();
      await rp.goto(ro.url);
      await rp.waitForSelector('[data-conn="live"][data-can-act="false"]');
      await rp.click('[data-page="questions"]');
      await rp.waitForSelector(`[data-question="${q.id}"]`);
      expect(await rp.$$(`[data-question="${q.id}"] [data-act]`)).toHaveLength(0);
      expect(await answerFromScript(rp, q.id, 'yes')).toBe(403);
      await rp.close();
    } finally {
      await ro.close();
    }
    expect(
      (await bb.getArtefacts(await bb.listArtefactIds())).some((a) => a?.source_artefacts.includes(q.id)),
    ).toBe(false);
  });

  it('shows each agent: its load, a pause with its reason and class, and its last Failure with its class', async () => {
    const p = await page();
    await setAgents(bb, [
      { role: 'Writer', kind: 'standard' },
      { role: 'Finisher', kind: 'standard' },
    ]);
    await writeAgentStatus(bb.redis, bb.instance, 'Writer', {
      state: 'paused',
      paused_reason: 'the model server refused the key',
      paused_class: 'auth',
      paused_until_ms: 0,
      model: 'gpt-test',
      calls_in_window: 7,
      tokens_in_window: 1200,
      window_ms: 3_600_000,
      calls_limit: 0,
      tokens_limit: 0,
      cost_usd_total: 0.0123,
      cost_usd_limit: 0,
      consecutive_errors: 3,
      updated_at_ms: Date.now(),
    });
    await bb.createArtefact(
      artefact({
        structural_type: 'Failure',
        type: 'ToolFailure',
        produced_by_role: 'Writer',
        payload: JSON.stringify({ error_class: 'auth', reason: '<b>401</b>' }),
      }),
    );
    await p.click('[data-page="agents"]');
    await p.waitForSelector('tr[data-agent="Writer"][data-state="paused"]');
    const cells = await p.$$eval('tr[data-agent="Writer"] td', (tds) => tds.map((t) => t.textContent));
    expect(cells.slice(0, 6)).toEqual([
      'Writer',
      'standard',
      '0',
      'paused (auth): the model server refused the key',
      'gpt-test',
      '7',
    ]);
    await p.waitForFunction(
      () =>
        (globalThis as { document?: { querySelector(s: string): { textContent: string } | null } }).document
          ?.querySelector('tr[data-agent="Writer"] .agent-error')
          ?.textContent.startsWith('ToolFailure [auth]') === true,
    );
    expect(await p.$$('tr[data-agent="Writer"] b')).toHaveLength(0);
    expect(await p.$('tr[data-agent="Finisher"]')).not.toBeNull();
  });
});
