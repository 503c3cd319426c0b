import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../../test/harness/browser.ts';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { freePort } from '../../test/harness/ports.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { hashToken, newToken } from '../access/tokens.ts';
import { Blackboard } from '../blackboard/client.ts';
import { artefact } from '../blackboard/testkit.ts';
import { silentLogger } from '../common/logger.ts';
import { answerCard, answerFromScript, answersTo, askQuestion, openQuestion } from '../console/testkit.ts';
import { writeTokenFile } from '../ingress/tokens.ts';
import { ensureSchema } from '../state/migrate.ts';
import type { Orchestrator } from './orchestrator.ts';
import { register, startOrchestrator, startServedIngress } from './testkit.ts';

// The console as the orchestrator serves it at /console of its ingress port (real Redis, Postgres,
// NATS, headless Chromium): a browser signs in with a console token of the Holt's token file, watches a
// goal arrive and answers a question (an `act` token) or only looks (a `read` token); no way in without
// a token, a wrong one counts against its source, a revoked one ends its sessions, a standby answers 503.

let redis: RedisServer;
let pg: PostgresServer;
let nats: NatsServer;
let dir: string;
let browser: Browser;
const stops: (() => Promise<void>)[] = [];
const instance = `c${randomUUID().slice(0, 8)}`;
const actToken = newToken();
const readToken = newToken();
let file: string;
let bb: Blackboard;

/** Watcher's ingress token (an agent's, which opens no console). */
const agentToken = newToken();

const consoleTokens = (tokens: { name: string; token: string; access: 'read' | 'act' }[]) =>
  writeTokenFile(file, {
    tokens: [{ name: 'ci', role: 'Watcher', sha256: hashToken(agentToken), modes: ['enqueue_message'] }],
    console: tokens.map((t) => ({ name: t.name, sha256: hashToken(t.token), access: t.access })),
  });

/** The orchestrator's ingress with its console, for `orch`; resolves with its base URL. */
async function serve(orch: Orchestrator, authFailures = 20): Promise<string> {
  const env = {
    DATABASE_URL: pg.url,
    NATS_URL: nats.url,
    HOLT_INGRESS_PORT: String(await freePort()),
    HOLT_INGRESS_TOKENS_FILE: file,
    HOLT_INGRESS_AUTH_FAILURES: String(authFailures),
    HOLT_CONSOLE: 'true',
    // Only the bus's events refresh the living agents within a test: its poll never comes.
    HOLT_CONSOLE_POLL_MS: '600000',
  };
  const ingress = await startServedIngress(orch, { instance, env, bb });
  stops.push(() => ingress.close());
  return `http://127.0.0.1:${ingress.port}`;
}

const signIn = (base: string, token: string, origin?: string) =>
  fetch(`${base}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(origin ? { origin } : {}),
    },
    body: new URLSearchParams({ token }).toString(),
  });

/** A new browser context signed in to the console with `token`, on its page. */
async function signedIn(token: string) {
  const ctx = await browser.createBrowserContext();
  const p = await ctx.newPage();
  await p.goto(`${base}/console/`);
  await p.type('input[name="token"]', token);
  await Promise.all([p.waitForNavigation(), p.click('button[type="submit"]')]);
  return { ctx, p };
}

let leader: Orchestrator;
let base: string;

beforeAll(async () => {
  [redis, pg, nats] = await Promise.all([startRedis(), startPostgres(), startNats()]);
  await ensureSchema(pg.url, silentLogger());
  dir = makeTempDir('orch-console');
  file = join(dir, 'tokens.json');
  consoleTokens([
    { name: 'operator', token: actToken, access: 'act' },
    { name: 'viewer', token: readToken, access: 'read' },
  ]);
  bb = Blackboard.connect(redis.url, instance);
  stops.push(() => bb.close());
  await register(bb, ['Watcher']);
  leader = startOrchestrator(redis.url, instance, { leaseTtlMs: 30_000 });
  stops.push(() => leader.stop());
  await leader.whenLeader();
  base = await serve(leader);
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  for (const s of stops.splice(0).reverse()) await s().catch(() => undefined);
  await Promise.all([redis?.stop(), pg?.stop(), nats?.stop()]);
  removeDir(dir);
});

describe("the orchestrator's console", () => {
  it('signs a browser in with an act token: the goal appears live and a question is answered from the page', async () => {
    const ctx = await browser.createBrowserContext();
    try {
      const p = await ctx.newPage();
      await p.goto(`${base}/console`);
      expect(new URL(p.url()).pathname).toBe('/console/');
      await p.type('input[name="token"]', actToken);
      await Promise.all([p.waitForNavigation(), p.click('button[type="submit"]')]);
      await p.waitForSelector('[data-conn="live"][data-can-act="true"]');
      // The cookie is the console's only: HttpOnly, SameSite=Strict, under /console/.
      const [cookie] = await p.browserContext().cookies();
      expect(cookie).toMatchObject({
        name: 'holt_console',
        httpOnly: true,
        sameSite: 'Strict',
        path: '/console/',
      });
      expect(await p.content()).not.toContain(actToken);

      const goal = artefact({ payload: 'watch me' });
      await bb.createArtefact(goal);
      await p.waitForSelector(`tr[data-goal="${goal.id}"]`);
      const q = await askQuestion(bb, 'Which branch?', [goal.id]);
      await answerCard(p, await openQuestion(p, q.id), 'main');
      const answers = await answersTo(bb, q.id);
      expect(answers).toEqual([expect.objectContaining({ payload: 'main', produced_by_role: 'user' })]);
    } finally {
      await ctx.close();
    }
  });

  it("the living agents page shows a message queued through the ingress at once (its wake bell, not a poll); an agent's token opens no console", async () => {
    expect((await signIn(base, agentToken)).status).toBe(401);
    const { ctx, p } = await signedIn(actToken);
    try {
      await p.waitForSelector('[data-conn="live"]');
      await p.click('[data-page="living"]');
      const sent = await fetch(`${base}/v1/agents/Watcher/messages`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${agentToken}`,
          'idempotency-key': 'build-12',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ text: 'Build 12 is red' }),
      });
      expect(sent.status).toBe(202);
      await p.waitForFunction("document.body.textContent.includes('Build 12 is red')", { timeout: 10_000 });
    } finally {
      await ctx.close();
    }
  });

  it('a read token only looks: no answer button, and its session may not answer; signing out ends it', async () => {
    const { ctx, p } = await signedIn(readToken);
    try {
      await p.waitForSelector('[data-conn="live"][data-can-act="false"]');
      const q = artefact({ structural_type: 'Question', type: 'Question', payload: 'Ship it?' });
      await bb.createArtefact(q);
      await p.click('[data-page="questions"]');
      await p.waitForSelector(`[data-question="${q.id}"]`);
      expect(await p.$$(`[data-question="${q.id}"] [data-act]`)).toHaveLength(0);
      expect(await answerFromScript(p, q.id, 'yes')).toBe(403);
      // Signing out ends the session: the page shows the sign-in form, and the session is gone.
      const [cookie] = await ctx.cookies();
      await Promise.all([p.waitForNavigation(), p.click('[data-act="sign-out"]')]);
      await p.waitForSelector('input[name="token"]');
      const after = await fetch(`${base}/console/api/workflows`, {
        headers: { cookie: `${cookie?.name}=${cookie?.value}` },
      });
      expect(after.status).toBe(401);
    } finally {
      await ctx.close();
    }
  });

  it('no way in without a token; a sign-in from another origin is refused; a revoked token ends its sessions', async () => {
    const page = await fetch(`${base}/console/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await page.text()).toContain('name="token"');
    expect((await fetch(`${base}/console/api/workflows`)).status).toBe(401);
    expect((await fetch(`${base}/console/api/events`)).status).toBe(401);
    expect((await signIn(base, actToken, 'http://evil.example')).status).toBe(403);
    // What a page under no-referrer (any site may set it) sends: not ours, so refused.
    expect((await signIn(base, actToken, 'null')).status).toBe(403);

    const ok = await signIn(base, readToken);
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/console/');
    const cookie = ok.headers.get('set-cookie')!.split(';')[0]!;
    const workflows = () => fetch(`${base}/console/api/workflows`, { headers: { cookie } });
    expect((await workflows()).status).toBe(200);
    // The viewer's token leaves the file: its session ends at its next request.
    consoleTokens([{ name: 'operator', token: actToken, access: 'act' }]);
    await eventually('the revoked session refused', async () => (await workflows()).status === 401);
    expect((await signIn(base, readToken)).status).toBe(401);
    consoleTokens([
      { name: 'operator', token: actToken, access: 'act' },
      { name: 'viewer', token: readToken, access: 'read' },
    ]);
  });

  it("wrong tokens count against their source like the ingress's; a standby answers 503", async () => {
    const standby = startOrchestrator(redis.url, instance, { leaseTtlMs: 30_000 });
    stops.push(() => standby.stop());
    const strict = await serve(leader, 3);
    for (let i = 0; i < 3; i++) expect((await signIn(strict, 'holt_wrong')).status).toBe(401);
    // Past its failed authentications the source is refused everything, the right token too.
    const blocked = await signIn(strict, actToken);
    expect(blocked.status).toBe(429);
    const toStandby = await serve(standby);
    const refused = await fetch(`${toStandby}/console/`);
    expect(refused.status).toBe(503);
    expect(await refused.text()).not.toContain('name="token"');
  });
});
