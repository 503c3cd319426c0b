import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { call, text } from '../../test/harness/llm.ts';
import {
  llmPupEnv,
  startLifeIngress,
  startPupRuntime,
  useRuntimeStores,
} from '../../test/harness/llm-runtime.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { DeliveryEvent } from '../bus/events.ts';
import { requestWithHeaders } from '../bus/message.ts';
import { agentEventSubject, toolOutcomeSubject } from '../bus/subjects.ts';
import { describeDelivery } from '../cli/commands/life.ts';
import { silentLogger } from '../common/logger.ts';
import type { IngressServer } from '../ingress/server.ts';
import { deliverySecretOf } from '../ingress/signature.ts';
import { createToken, tokenSource } from '../ingress/tokens.ts';
import { ReplyStore } from '../life/replies.ts';
import { DEFAULT_DELIVERY, DeliveryLoop } from '../orchestrator/delivery.ts';
import { lifeActorOf } from '../state/ids.ts';

// Delivery to whoever asked, end to end on real servers: a message through the real ingress names a
// callback its token registered; a living agent's pup (scripted model) works on it; the orchestrator's
// delivery loop POSTs the outcome to a receiver that verifies it with the Standard Webhooks library
// (written by others), and retries a receiver that fails.

const stores = useRuntimeStores('delivery-ws');
let dir: string;
let file: string;
let token: string;
let ingress: IngressServer | undefined;
let loop: DeliveryLoop | undefined;
let instance = '';
let n = 0;

/** A callback receiver: verifies each request as a receiver would, answers `failFirst` times with 500. */
interface Receiver {
  url: string;
  got: {
    id: string;
    ts: string;
    raw: string;
    headers: Record<string, string>;
    body: Record<string, unknown>;
    verified: boolean;
    idempotencyKey?: string;
  }[];
  close(): Promise<void>;
}
async function receiver(failFirst = 0): Promise<Receiver> {
  const got: Receiver['got'] = [];
  const hook = () => new Webhook(deliverySecretOf(token));
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      let verified = false;
      try {
        hook().verify(raw, headers);
        verified = true;
      } catch {
        verified = false;
      }
      got.push({
        id: headers['webhook-id'] ?? '',
        ts: headers['webhook-timestamp'] ?? '',
        raw,
        headers,
        body: JSON.parse(raw) as Record<string, unknown>,
        verified,
        ...(headers['idempotency-key'] ? { idempotencyKey: headers['idempotency-key'] } : {}),
      });
      res.writeHead(got.length <= failFirst ? 500 : 204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/hooks/holt?secret-path=abc`,
    got,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

beforeAll(() => {
  dir = makeTempDir('delivery');
  file = join(dir, 'tokens.json');
});
afterEach(async () => {
  await loop?.stop();
  await ingress?.close();
  loop = undefined;
  ingress = undefined;
});
afterAll(() => removeDir(dir));

/** A new instance with a token whose callbacks are these receivers, its ingress and delivery loop. */
async function serve(callbacks: Record<string, string>): Promise<void> {
  instance = `deliv${++n}`;
  const served = instance;
  token = createToken(file, {
    name: `ci-${n}`,
    role: 'coder',
    modes: ['enqueue_message'],
    origin: 'webhook',
    callbacks: Object.entries(callbacks).map(([name, url]) => ({ name, url })),
  }).token;
  const tokens = tokenSource(file, () => undefined);
  ingress = await startLifeIngress(stores, served, tokens);
  loop = new DeliveryLoop({
    replies: new ReplyStore(stores.pool),
    tokens,
    log: silentLogger(),
    settings: { ...DEFAULT_DELIVERY, retryBaseMs: 100, pollMs: 100 },
    publish: (e) => stores.nc.publish(agentEventSubject(e.actor_id, 'delivery'), JSON.stringify(e)),
    request: (subject, body, h, timeoutMs) => requestWithHeaders(stores.nc, subject, body, h, timeoutMs),
  });
  loop.start();
  await startPupRuntime(
    stores,
    llmPupEnv(stores, served, { HOLT_LLM_LIFE: 'true', HOLT_LIFE_POLL_MS: '200' }),
  );
}

const send = async (body: Record<string, unknown>) => {
  const r = await fetch(`http://127.0.0.1:${ingress!.port}/v1/agents/coder/messages`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'idempotency-key': `k-${Math.random()}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as { id?: string; error?: string } };
};

describe('delivery of outcomes to callbacks', () => {
  it("delivers the work item's completion report to the callback the message named, signed; a failing receiver is retried with the same id", async () => {
    const ci = await receiver(2);
    const other = await receiver();
    try {
      await serve({ ci: ci.url, other: other.url });
      const events: DeliveryEvent[] = [];
      const sub = stores.nc.subscribe(agentEventSubject(lifeActorOf(instance, 'coder'), 'delivery'), {
        callback: (_e, m) => {
          events.push(DeliveryEvent.parse(m.json()));
        },
      });
      stores.llm.reset([
        call('work_create', { objective: 'report on build 7' }),
        { toolCalls: [{ name: 'work_complete', arguments: {} }], text: 'Build 7 is green: 212/212.' },
        text('reported'),
      ]);
      // A name the token did not register is refused, and so is a URL (never a caller's).
      expect((await send({ text: 'x', reply_to: 'nope' })).body.error).toContain('its callbacks: ci, other');
      expect((await send({ text: 'x', reply_to: 'https://attacker.example/' })).status).toBe(400);
      expect((await send({ text: 'x', reply_to: { url: 'http://169.254.169.254/' } })).status).toBe(400);
      const sent = await send({ text: 'Build 7 started; tell us how it ends.', reply_to: 'ci' });
      expect(sent.status).toBe(202);
      await eventually('delivered after two failures', async () => ci.got.length === 3, {
        timeoutMs: 20_000,
      });
      expect(other.got).toEqual([]);
      expect(ci.got.map((g) => g.verified)).toEqual([true, true, true]);
      // One delivery id for every attempt (also its idempotency key), each attempt its own timestamp.
      expect(new Set(ci.got.map((g) => g.id)).size).toBe(1);
      expect(ci.got.every((g) => g.idempotencyKey === g.id)).toBe(true);
      expect(ci.got[2]!.body).toMatchObject({
        type: 'holt.outcome',
        delivery_id: ci.got[0]!.id,
        agent: 'coder',
        message_id: sent.body.id,
        state: 'completed',
        text: 'Build 7 is green: 212/212.',
        work_item: expect.any(String),
      });
      // The same check with another token's key fails: only the token's holder can verify (or sign).
      const last = ci.got[2]!;
      expect(() =>
        new Webhook(deliverySecretOf('holt_not-the-token')).verify(last.raw, last.headers),
      ).toThrow();
      expect(() => new Webhook(deliverySecretOf(token)).verify(`${last.raw} `, last.headers)).toThrow();
      // Its state: in the store (holt life show prints it) and in events.
      const [reply] = await new ReplyStore(stores.pool).list(instance, 'coder');
      expect(reply).toMatchObject({ status: 'delivered', attempts: 3, last_status: 204 });
      const shown = describeDelivery(reply!);
      expect(shown).toMatch(
        /message #\d+ → ci \(127\.0\.0\.1:\d+\): delivered .* after 3 attempt\(s\) \(204\)/,
      );
      expect(shown).not.toContain('secret-path');
      await eventually('three events', async () => events.length === 3);
      expect(events.map((e) => [e.state, e.attempt, e.status])).toEqual([
        ['retrying', 1, 500],
        ['retrying', 2, 500],
        ['delivered', 3, 204],
      ]);
      sub.unsubscribe();
    } finally {
      await ci.close();
      await other.close();
    }
  });

  it("without a work item, the turn's final text; a receiver that never answers 2xx fails for good after the attempts", async () => {
    const ok = await receiver();
    const down = await receiver(1000);
    try {
      await serve({ ok: ok.url, down: down.url });
      stores.llm.reset([text('It is 42.'), text('It is 43.')]);
      expect((await send({ text: 'what is it?', reply_to: 'ok' })).status).toBe(202);
      await eventually('the answer delivered', async () => ok.got.length === 1, { timeoutMs: 20_000 });
      expect(ok.got[0]!.body).toMatchObject({ state: 'completed', text: 'It is 42.' });
      expect(ok.got[0]!.verified).toBe(true);
      await loop!.stop();
      loop = new DeliveryLoop({
        replies: new ReplyStore(stores.pool),
        tokens: tokenSource(file, () => undefined),
        log: silentLogger(),
        settings: { ...DEFAULT_DELIVERY, retryBaseMs: 50, pollMs: 50, maxAttempts: 3 },
      });
      loop.start();
      expect((await send({ text: 'and now?', reply_to: 'down' })).status).toBe(202);
      await eventually(
        'failed for good',
        async () =>
          (await new ReplyStore(stores.pool).list(instance, 'coder')).some((r) => r.status === 'failed'),
        { timeoutMs: 20_000 },
      );
      expect(down.got).toHaveLength(3);
      const failed = (await new ReplyStore(stores.pool).list(instance, 'coder')).find(
        (r) => r.status === 'failed',
      );
      expect(describeDelivery(failed!)).toContain('failed after 3 attempt(s): the callback answered 500');
    } finally {
      await ok.close();
      await down.close();
    }
  });

  it('delivers to a tool service over NATS (a nats:<tool> callback), signed; no responder yet is retried', async () => {
    await serve({ svc: 'nats:notify' });
    stores.llm.reset([text('Deployed 1.2.3.')]);
    const subject = toolOutcomeSubject(instance, 'notify');
    // Nobody listens at first: "no responders", retried until the service is up.
    expect((await send({ text: 'deploy 1.2.3', reply_to: 'svc' })).status).toBe(202);
    await eventually(
      'a failed attempt',
      async () => ((await new ReplyStore(stores.pool).list(instance, 'coder'))[0]?.attempts ?? 0) >= 1,
      { timeoutMs: 20_000 },
    );
    const got: { body: Record<string, unknown>; verified: boolean }[] = [];
    const sub = stores.nc.subscribe(subject, {
      callback: (_e, m) => {
        const headers = Object.fromEntries(
          ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((k) => [k, m.headers?.get(k) ?? '']),
        );
        let verified = false;
        try {
          new Webhook(deliverySecretOf(token)).verify(m.string(), headers);
          verified = true;
        } catch {
          verified = false;
        }
        got.push({ body: JSON.parse(m.string()) as Record<string, unknown>, verified });
        m.respond('{"ok":true}');
      },
    });
    await stores.nc.flush();
    await eventually(
      'delivered over NATS',
      async () => (await new ReplyStore(stores.pool).list(instance, 'coder'))[0]?.status === 'delivered',
      { timeoutMs: 20_000 },
    );
    sub.unsubscribe();
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({
      verified: true,
      body: { state: 'completed', text: 'Deployed 1.2.3.', callback: 'svc' },
    });
    const [reply] = await new ReplyStore(stores.pool).list(instance, 'coder');
    expect(reply!.last_error).toBeNull();
    expect(reply!.attempts).toBeGreaterThanOrEqual(2);
    expect(describeDelivery(reply!)).toMatch(
      /→ svc \(nats:notify\): delivered .* after \d+ attempt\(s\) \(200\)/,
    );
  });

  it('two replicas send each delivery once; one started after the other stopped sends what was pending', async () => {
    const rx = await receiver();
    try {
      await serve({ rx: rx.url });
      await loop!.stop(); // nothing sends until the outcomes are in
      let release!: () => void;
      const held = new Promise<void>((r) => {
        release = r;
      });
      stores.llm.reset([{ after: held, reply: text('first') }, text('second'), text('third')]);
      for (const t of ['one', 'two', 'three'])
        expect((await send({ text: t, reply_to: 'rx' })).status).toBe(202);
      const replicas = [0, 1].map(
        () =>
          new DeliveryLoop({
            replies: new ReplyStore(stores.pool),
            tokens: tokenSource(file, () => undefined),
            log: silentLogger(),
            settings: { ...DEFAULT_DELIVERY, pollMs: 20 },
          }),
      );
      for (const r of replicas) r.start();
      release();
      await eventually(
        'all delivered',
        async () =>
          (await new ReplyStore(stores.pool).list(instance, 'coder')).every((r) => r.status === 'delivered'),
        { timeoutMs: 20_000 },
      );
      await Promise.all(replicas.map((r) => r.stop()));
      // Three deliveries, each sent once, by one replica or the other.
      expect(rx.got).toHaveLength(3);
      expect(new Set(rx.got.map((g) => g.id)).size).toBe(3);
      const replies = await new ReplyStore(stores.pool).list(instance, 'coder');
      expect(replies.map((r) => r.attempts)).toEqual([1, 1, 1]);
    } finally {
      await rx.close();
    }
  });
});
