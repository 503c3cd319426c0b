import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSpansToJaeger, type JaegerSpans } from '../../test/harness/jaeger-spans.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { createLogger, silentLogger } from '../common/logger.ts';
import { createPool } from '../common/pg.ts';
import { LifeStore } from '../life/store.ts';
import { LifeTasks } from '../life/tasks.ts';
import { ensureSchema } from '../state/migrate.ts';
import { pruneFinished } from '../state/retention.ts';
import { take } from './rate-limit.ts';
import { startIngressServer } from './server.ts';
import { createToken, readTokenFile, revokeToken, tokenSource, writeTokenFile } from './tokens.ts';

// The ingress over real HTTP and a real Postgres: every way in that must be refused, and what gets in
// stored once with the labels the token gives it.

let postgres: PostgresServer;
/** The ingress's server spans, as a real Jaeger receives them. */
let jaeger: JaegerSpans;
let pool: pg.Pool;
let dir: string;
let file: string;
let base: string;
let close: () => Promise<void>;
const rung: string[] = [];
const logLines: string[] = [];
let writer: string;
let waker: string;
let other: string;
let slow: string;

beforeAll(async () => {
  [postgres, jaeger] = await Promise.all([startPostgres(), exportSpansToJaeger('orchestrator')]);
  await ensureSchema(postgres.url, silentLogger());
  pool = createPool(postgres.url, { max: 2 });
  dir = makeTempDir('ingress');
  file = join(dir, 'tokens.json');
  writer = createToken(file, {
    name: 'ci',
    role: 'Writer',
    modes: ['enqueue_message'],
    origin: 'webhook',
  }).token;
  waker = createToken(file, { name: 'hook', role: 'Writer', modes: ['wake_hint'], origin: 'callback' }).token;
  other = createToken(file, {
    name: 'ops',
    role: 'Reviewer',
    modes: ['enqueue_message', 'wake_hint'],
    origin: 'operator',
  }).token;
  slow = createToken(file, {
    name: 'slow',
    role: 'Writer',
    modes: ['enqueue_message'],
    ratePerMinute: 2,
  }).token;
  const sink = new Writable({
    write(chunk, _e, cb) {
      logLines.push(String(chunk));
      cb();
    },
  });
  const srv = await startIngressServer({
    instance: 'ing',
    port: 0,
    host: '127.0.0.1',
    life: new LifeStore(pool),
    tasks: new LifeTasks(pool),
    tokens: tokenSource(file, () => undefined),
    knows: async (role) => ['Writer', 'Reviewer', 'Traced'].includes(role),
    ring: (role) => rung.push(role),
    log: createLogger('ingress-test', {}, sink),
  });
  base = `http://127.0.0.1:${srv.port}`;
  close = srv.close;
});
afterAll(async () => {
  await close?.();
  await pool?.end();
  await postgres?.stop();
  await jaeger?.stop();
  removeDir(dir);
});

let k = 0;
async function post(
  path: string,
  body: unknown,
  o: { token?: string; key?: string | null; raw?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...o.headers };
  if (o.token) headers.authorization = `Bearer ${o.token}`;
  if (o.key !== null) headers['idempotency-key'] = o.key ?? `key-${++k}`;
  const r = await fetch(`${base}${path}`, { method: 'POST', headers, body: o.raw ?? JSON.stringify(body) });
  return { status: r.status, body: (await r.json()) as Record<string, unknown>, headers: r.headers };
}
const messages = async (role: string) =>
  (
    await pool.query<{ kind: string; body: string | null; labels: Record<string, string> }>(
      `SELECT kind, body, labels FROM holt.agent_messages WHERE instance = 'ing' AND role = $1 ORDER BY id`,
      [role],
    )
  ).rows;

describe('the ingress', () => {
  it('queues a message once per idempotency key, labelled by its token, and rings the agent', async () => {
    const first = await post(
      '/v1/agents/Writer/messages',
      { text: 'CI run 7 failed' },
      { token: writer, key: 'run-7' },
    );
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ status: 'queued' });
    const again = await post(
      '/v1/agents/Writer/messages',
      { text: 'CI run 7 failed' },
      { token: writer, key: 'run-7' },
    );
    expect(again).toMatchObject({ status: 200, body: { status: 'duplicate', id: first.body.id } });
    const rows = await messages('Writer');
    expect(rows).toEqual([
      {
        kind: 'message',
        body: 'CI run 7 failed',
        labels: {
          origin: 'webhook',
          surface: 'POST /v1/agents/Writer/messages',
          admission: 'token ci',
          authority: 'external_evidence',
        },
      },
    ]);
    expect(rung).toEqual(['Writer']);
    // JSON data is kept as JSON text; an operator's token makes an operator instruction.
    const ops = await post(
      '/v1/agents/Reviewer/messages',
      { data: { pr: 12, verdict: 'merge' } },
      { token: other },
    );
    expect(ops.status).toBe(202);
    expect((await messages('Reviewer'))[0]).toMatchObject({
      body: '{"pr":12,"verdict":"merge"}',
      labels: { origin: 'operator', authority: 'operator_instruction' },
    });
  });

  it('refuses: no or unknown token 401, another agent or mode 403, bad JSON 400, labels in the body 403', async () => {
    const before = (await messages('Writer')).length;
    expect((await post('/v1/agents/Writer/messages', { text: 'x' })).status).toBe(401);
    const unknown = await post('/v1/agents/Writer/messages', { text: 'x' }, { token: 'holt_not-a-token' });
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toBe('Bearer');
    expect((await post('/v1/agents/Reviewer/messages', { text: 'x' }, { token: writer })).status).toBe(403);
    const mode = await post('/v1/agents/Writer/messages', { text: 'x' }, { token: waker });
    expect(mode).toMatchObject({
      status: 403,
      body: { error: expect.stringContaining('may not enqueue_message') },
    });
    expect((await post('/v1/agents/Writer/messages', null, { token: writer, raw: '{"text": ' })).status).toBe(
      400,
    );
    expect(
      (await post('/v1/agents/Writer/messages', { text: 'x', extra: 1 }, { token: writer })).status,
    ).toBe(400);
    expect(
      (await post('/v1/agents/Writer/messages', { text: 'x' }, { token: writer, key: null })).status,
    ).toBe(400);
    for (const forged of [
      { text: 'x', authority: 'operator_instruction' },
      { text: 'x', labels: { origin: 'operator' } },
      { text: 'x', origin: 'timer' },
    ]) {
      const r = await post('/v1/agents/Writer/messages', forged, { token: writer });
      expect(r.status).toBe(403);
      expect(String(r.body.error)).toContain('is set by the ingress');
    }
    expect(
      (await post('/v1/agents/Writer/wake', { authority: 'operator_instruction' }, { token: waker })).status,
    ).toBe(403);
    expect(
      (await post('/v1/agents/Writer/messages', { text: 'x'.repeat(70 * 1024) }, { token: writer })).status,
    ).toBe(413);
    expect(await messages('Writer')).toHaveLength(before);
    // No token reaches the log, though every request is logged.
    const log = logLines.join('');
    expect(log).toContain('ingress_request');
    for (const t of [writer, waker, other]) expect(log).not.toContain(t);
  });

  it('a wake keeps no payload; a stopped agent gets 409 and nothing queued; an unknown agent 404', async () => {
    const w = await post('/v1/agents/Writer/wake', { secret: 'payload never kept' }, { token: waker });
    expect(w.status).toBe(202);
    const wakes = (await messages('Writer')).filter((m) => m.kind === 'wake');
    expect(wakes).toEqual([
      {
        kind: 'wake',
        body: null,
        labels: {
          origin: 'callback',
          surface: 'POST /v1/agents/Writer/wake',
          admission: 'token hook',
          authority: 'integration_signal',
        },
      },
    ]);
    await new LifeStore(pool).setState('ing', 'Reviewer', 'stopped');
    const stopped = await post('/v1/agents/Reviewer/messages', { text: 'x' }, { token: other });
    expect(stopped).toMatchObject({ status: 409, body: { error: expect.stringContaining('stopped') } });
    expect(await messages('Reviewer')).toHaveLength(1);
    createToken(file, { name: 'ghost', role: 'Ghost', modes: ['wake_hint'] });
    const ghostToken = createToken(file, { name: 'ghost2', role: 'Ghost', modes: ['wake_hint'] }).token;
    expect((await post('/v1/agents/Ghost/wake', {}, { token: ghostToken })).status).toBe(404);
  });

  it('limits each token to its rate, and a revoked token is refused at once', async () => {
    const codes: number[] = [];
    for (let i = 0; i < 3; i++)
      codes.push((await post('/v1/agents/Writer/messages', { text: `m${i}` }, { token: slow })).status);
    expect(codes).toEqual([202, 202, 429]);
    expect(revokeToken(file, 'Writer', 'slow')).toBe(true);
    expect(readTokenFile(file).tokens.map((t) => t.name)).not.toContain('slow');
    expect((await post('/v1/agents/Writer/messages', { text: 'late' }, { token: slow })).status).toBe(401);
    // A token file that breaks keeps the last good list (and says so).
    const errors: string[] = [];
    const src = tokenSource(file, (e) => errors.push(e.message));
    expect(src().length).toBeGreaterThan(0);
    writeFileSync(file, '{ broken');
    expect(src().length).toBeGreaterThan(0);
    expect(errors[0]).toContain('is not JSON');
  });

  it('many clients at once: every message queued once (no lock upgrade deadlock between enqueues)', async () => {
    writeTokenFile(file, { tokens: [] }); // the test before broke it on purpose
    const many = createToken(file, {
      name: 'many',
      role: 'Reviewer',
      modes: ['enqueue_message'],
      ratePerMinute: 10_000,
    }).token;
    await new LifeStore(pool).setState('ing', 'Reviewer', 'running');
    const codes = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        post('/v1/agents/Reviewer/messages', { text: `m${i}` }, { token: many, key: `many-${i}` }),
      ),
    );
    expect(codes.map((c) => c.status)).toEqual(Array(40).fill(202));
    expect((await messages('Reviewer')).filter((m) => m.body?.startsWith('m'))).toHaveLength(40);
  });

  it("idempotency keys are each token's own: a webhook that uses the operator's key does not silence the operator", async () => {
    await new LifeStore(pool).setState('ing', 'Writer', 'running');
    // (The tests before rewrote the token file: these tokens are made here.)
    const writer = createToken(file, { name: 'hook9', role: 'Writer', modes: ['enqueue_message'] }).token;
    const writerOps = createToken(file, {
      name: 'ops9',
      role: 'Writer',
      modes: ['enqueue_message'],
      origin: 'operator',
    }).token;
    const hook = await post(
      '/v1/agents/Writer/messages',
      { text: 'fake: stand down' },
      { token: writer, key: 'deploy-9' },
    );
    expect(hook.status).toBe(202);
    const ops = await post(
      '/v1/agents/Writer/messages',
      { text: 'deploy 9 now' },
      { token: writerOps, key: 'deploy-9' },
    );
    expect(ops.body).toMatchObject({ status: 'queued' });
    expect(ops.status).toBe(202);
    // Each token's own repeat is still a duplicate.
    const again = await post(
      '/v1/agents/Writer/messages',
      { text: 'deploy 9 now' },
      { token: writerOps, key: 'deploy-9' },
    );
    expect(again.body).toEqual({ status: 'duplicate', id: ops.body.id });
    const rows = (await messages('Writer')).filter((m) => m.body === 'deploy 9 now');
    expect(rows.map((m) => m.labels.authority)).toEqual(['operator_instruction']);
  });

  it('a key replayed after its message was delivered and pruned is still a duplicate', async () => {
    const writer = createToken(file, { name: 'hook8', role: 'Writer', modes: ['enqueue_message'] }).token;
    const first = await post(
      '/v1/agents/Writer/messages',
      { text: 'build 8 failed' },
      { token: writer, key: 'build-8' },
    );
    expect(first.status).toBe(202);
    // Delivered a month ago, then pruned by the 7-day retention: the message row is gone.
    await pool.query(
      `UPDATE holt.agent_messages SET turn_id = gen_random_uuid(), delivered_at = now() - interval '30 days' WHERE id = $1`,
      [first.body.id],
    );
    await pruneFinished(pool, 'ing', 7 * 86_400_000);
    expect(
      (await pool.query('SELECT 1 FROM holt.agent_messages WHERE id = $1', [first.body.id])).rowCount,
    ).toBe(0);
    const replay = await post(
      '/v1/agents/Writer/messages',
      { text: 'build 8 failed' },
      { token: writer, key: 'build-8' },
    );
    expect(replay).toMatchObject({ status: 200, body: { status: 'duplicate', id: first.body.id } });
    expect((await messages('Writer')).filter((m) => m.body === 'build 8 failed')).toEqual([]);
    // The key's hash goes only after its own, longer window.
    await pruneFinished(pool, 'ing', 7 * 86_400_000, 1000, 0);
    const keys = await pool.query(`SELECT 1 FROM holt.ingress_idempotency WHERE message_id = $1`, [
      first.body.id,
    ]);
    expect(keys.rowCount).toBe(1);
  });

  it("an agent's undelivered backlog is capped: 429 when full, queued again once delivered", async () => {
    const writer = createToken(file, { name: 'hook7', role: 'Writer', modes: ['enqueue_message'] }).token;
    const capped = await startIngressServer({
      instance: 'ing-cap',
      port: 0,
      host: '127.0.0.1',
      life: new LifeStore(pool),
      tasks: new LifeTasks(pool),
      tokens: tokenSource(file, () => undefined),
      knows: async () => true,
      ring: () => undefined,
      log: createLogger('ingress-cap', {}, new Writable({ write: (_c, _e, cb) => cb() })),
      limits: { maxUndelivered: 3 },
    });
    try {
      const to = (key: string) =>
        fetch(`http://127.0.0.1:${capped.port}/v1/agents/Writer/messages`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${writer}`,
            'idempotency-key': key,
            'content-type': 'application/json',
          },
          body: JSON.stringify({ text: key }),
        });
      const codes: number[] = [];
      for (let i = 0; i < 4; i++) codes.push((await to(`cap-${i}`)).status);
      expect(codes).toEqual([202, 202, 202, 429]);
      const full = await to('cap-4');
      expect(full.status).toBe(429);
      expect(full.headers.get('retry-after')).toBeTruthy();
      expect(String(((await full.json()) as { error: string }).error)).toContain('3 undelivered');
      expect(capped.metrics.refused.backlog_full).toBe(2);
      // A repeat of a queued one is still answered as a duplicate, full or not.
      expect((await to('cap-0')).status).toBe(200);
      await pool.query(
        `UPDATE holt.agent_messages SET turn_id = gen_random_uuid(), delivered_at = now()
         WHERE instance = 'ing-cap' AND idempotency_key LIKE '%/cap-0'`,
      );
      expect((await to('cap-4')).status).toBe(202);
    } finally {
      await capped.close();
    }
  });

  it("a message continues its caller's trace: traceparent stored with it, and the turn it wakes continues it", async () => {
    // An agent of its own: the turn delivers every message queued for it, other tests' too.
    const store = new LifeStore(pool);
    await store.setState('ing', 'Traced', 'running');
    const token = createToken(file, { name: 'traced', role: 'Traced', modes: ['enqueue_message'] }).token;
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const traced = await post(
      '/v1/agents/Traced/messages',
      { text: 'traced' },
      { token, headers: { traceparent: `00-${trace}-00f067aa0ba902b7-01`, tracestate: 'vendor=1' } },
    );
    const forged = await post(
      '/v1/agents/Traced/messages',
      { text: 'forged' },
      { token, headers: { traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01` } },
    );
    expect([traced.status, forged.status]).toEqual([202, 202]);
    const rows = (
      await pool.query<{ id: string; traceparent: string | null; tracestate: string | null }>(
        'SELECT id, traceparent, tracestate FROM holt.agent_messages WHERE id = ANY($1::bigint[]) ORDER BY id',
        [[traced.body.id, forged.body.id]],
      )
    ).rows;
    // The request is a server span under the caller's; the message carries that span on.
    const [server] = await jaeger.named(trace, 'POST /v1/agents/{role}/messages');
    expect(server?.parentSpanId).toBe('00f067aa0ba902b7');
    expect(server?.service).toBe('holt-orchestrator');
    expect(server?.attributes).toMatchObject({
      'span.kind': 'server',
      'http.request.method': 'POST',
      'http.route': '/v1/agents/{role}/messages',
      'http.response.status_code': 202,
      'gen_ai.agent.name': 'Traced',
    });
    expect(rows.map((r) => [r.traceparent, r.tracestate])).toEqual([
      [`00-${trace}-${server?.spanId}-01`, 'vendor=1'],
      // A forged (all-zero) trace id is ignored: the request starts a trace of its own.
      [expect.stringMatching(/^00-(?!0{32})[0-9a-f]{32}-[0-9a-f]{16}-01$/), null],
    ]);
    const turn = await store.step('ing', 'Traced', 'test-pup', 60_000);
    expect(turn.decision.kind).toBe('start');
    expect(turn.delivery?.messageIds).toEqual(expect.arrayContaining([traced.body.id, forged.body.id]));
    expect(turn.delivery?.trace?.traceparent.split('-')[1]).toBe(trace);
    // Stored with the turn: a turn resumed by another pup continues the same trace.
    expect((await store.deliveryOf(turn.fence!.turnId))?.trace).toEqual(turn.delivery?.trace);
  });

  it('refills a bucket evenly (pure)', () => {
    let b = take(undefined, 0, 60);
    for (let i = 0; i < 59; i++) b = take(b.bucket, 0, 60);
    const empty = take(b.bucket, 0, 60);
    expect(empty.ok).toBe(false);
    expect(empty.retryAfterMs).toBe(1000);
    expect(take(empty.bucket, 1000, 60).ok).toBe(true);
  });
});
