import { request } from 'node:http';
import { connect as tcp } from 'node:net';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { eventually } from '../../test/harness/wait.ts';
import { hashToken, type TokenEntry } from '../access/tokens.ts';
import { silentLogger } from '../common/logger.ts';
import { createPool } from '../common/pg.ts';
import { LifeStore } from '../life/store.ts';
import { LifeTasks } from '../life/tasks.ts';
import { ensureSchema } from '../state/migrate.ts';
import { sourceOf } from './guard.ts';
import { tooDeep } from './request.ts';
import { type IngressLimits, type IngressServer, startIngressServer } from './server.ts';

// The ingress against hostile callers, over real sockets and a real Postgres: what a stranger can make
// it hold (connections, slow heads and bodies, bodies without a token), how often it may guess a
// token, what malformed input gets (400 with its reason, never 503 "retry"), and a standby's answer.

let postgres: PostgresServer;
let pool: pg.Pool;
const servers: IngressServer[] = [];
const WRITER = 'holt_writer-token-for-hostile-tests';
const TOKENS: TokenEntry[] = [
  {
    name: 'ci',
    role: 'Writer',
    sha256: hashToken(WRITER),
    modes: ['enqueue_message', 'wake_hint'],
    origin: 'webhook',
    ratePerMinute: 100_000,
    maxPriority: 0,
    callbacks: [],
    createdAtMs: 0,
  },
];

beforeAll(async () => {
  postgres = await startPostgres();
  await ensureSchema(postgres.url, silentLogger());
  pool = createPool(postgres.url, { max: 4 });
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await pool?.end();
  await postgres?.stop();
});

let n = 0;
async function serve(limits: Partial<IngressLimits>, serving?: () => boolean) {
  const instance = `h${++n}`;
  const srv = await startIngressServer({
    instance,
    port: 0,
    host: '127.0.0.1',
    life: new LifeStore(pool),
    tasks: new LifeTasks(pool),
    tokens: () => TOKENS,
    knows: async (role) => role === 'Writer',
    ring: () => undefined,
    log: silentLogger(),
    limits,
    ...(serving ? { serving } : {}),
  });
  servers.push(srv);
  return { ...srv, instance };
}

/** A raw connection from `from` (any 127.0.0.0/8 address), keeping what the server sends. */
async function open(port: number, from = '127.0.0.1') {
  const socket = tcp({ host: '127.0.0.1', port, localAddress: from });
  let data = '';
  let isClosed = false;
  socket.on('data', (c: Buffer) => {
    data += c.toString('latin1');
  });
  socket.on('error', () => undefined); // a reset is one of the answers under test
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, closed, data: () => data, isClosed: () => isClosed };
}

const head = (o: { path?: string; token?: string; key?: string; length: number }) =>
  `POST ${o.path ?? '/v1/agents/Writer/messages'} HTTP/1.1\r\nHost: 127.0.0.1\r\n${
    o.token ? `Authorization: Bearer ${o.token}\r\n` : ''
  }Idempotency-Key: ${o.key ?? `k-${++n}`}\r\nContent-Type: application/json\r\nContent-Length: ${o.length}\r\n\r\n`;

/** One request on its own connection, from `from`. */
function post(
  port: number,
  body: string | Buffer,
  o: { path?: string; token?: string; key?: string; from?: string; type?: string } = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: o.path ?? '/v1/agents/Writer/messages',
        localAddress: o.from ?? '127.0.0.1',
        agent: false,
        headers: {
          'content-type': o.type ?? 'application/json',
          'idempotency-key': o.key ?? `k-${++n}`,
          ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c.toString('utf8');
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text || '{}'), headers: res.headers }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
const text = (s: string) => JSON.stringify({ text: s });
const queued = async (instance: string) =>
  Number(
    (
      await pool.query<{ n: string }>('SELECT count(*) AS n FROM holt.agent_messages WHERE instance = $1', [
        instance,
      ])
    ).rows[0]?.n,
  );

describe('the ingress under hostile callers', () => {
  it('a head that never ends, and a connection that sends nothing, are closed at the deadline; a late body gets 408', async () => {
    const srv = await serve({ headersTimeoutMs: 300, bodyTimeoutMs: 300 });
    const slow = await open(srv.port);
    slow.socket.write('POST /v1/agents/Writer/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const silent = await open(srv.port);
    await Promise.all([slow.closed, silent.closed]);
    expect(slow.data()).toMatch(/^HTTP\/1\.1 408 /);
    const body = await open(srv.port);
    body.socket.write(`${head({ token: WRITER, length: 100 })}{"text":`);
    await body.closed;
    expect(body.data()).toMatch(/^HTTP\/1\.1 408 /);
    expect(srv.metrics.refused.deadline).toBeGreaterThanOrEqual(2);
    expect(await queued(srv.instance)).toBe(0);
  });

  it('past the connection cap the biggest source gives up an idle connection to a smaller one; its own newcomers, or any when its connections are all in flight, are closed', async () => {
    const srv = await serve({ maxConnections: 4, maxPerSource: 100, bodyTimeoutMs: 60_000 });
    const idle = await Promise.all([1, 2, 3, 4].map(() => open(srv.port, '127.0.0.2')));
    await eventually('four open connections', () => srv.connections() === 4);
    expect((await post(srv.port, text('through'), { token: WRITER })).status).toBe(202);
    await eventually('one idle connection evicted', () => idle.filter((c) => c.isClosed()).length === 1);
    expect(srv.metrics.refused.evicted).toBe(1);
    // The flood's own newcomers take nothing from it: at the cap, one more from 127.0.0.2 is closed.
    await eventually("the caller's connection closed", () => srv.connections() === 3);
    await open(srv.port, '127.0.0.2');
    await eventually('four open connections', () => srv.connections() === 4);
    const more = await open(srv.port, '127.0.0.2');
    await more.closed;
    expect(more.data()).toBe('');
    expect(srv.metrics.refused.connection_cap).toBe(1);
    expect(idle.filter((c) => c.isClosed())).toHaveLength(1);
  });

  it('when the biggest source has only requests in flight, a newcomer is turned away and they are kept', async () => {
    const srv = await serve({ maxConnections: 2, maxPerSource: 100, bodyTimeoutMs: 60_000 });
    const busy = [];
    for (let i = 0; i < 2; i++) {
      const c = await open(srv.port, '127.0.0.3');
      c.socket.write(head({ token: WRITER, length: 100 }));
      busy.push(c);
      await eventually(`busy connection ${i + 1}`, () => srv.inFlight() === i + 1);
    }
    const late = await open(srv.port, '127.0.0.4');
    await late.closed;
    expect(late.data()).toBe('');
    expect(srv.metrics.refused.connection_cap).toBe(1);
    for (const c of busy) expect(c.isClosed()).toBe(false);
  });

  it('one source holds at most its share of connections; another source still gets in', async () => {
    const srv = await serve({ maxPerSource: 2 });
    const mine = await Promise.all([1, 2].map(() => open(srv.port, '127.0.0.5')));
    await eventually('two open connections', () => srv.connections() === 2);
    const third = await open(srv.port, '127.0.0.5');
    await third.closed;
    expect(srv.metrics.refused.source_cap).toBe(1);
    expect(mine.every((c) => !c.isClosed())).toBe(true);
    expect((await post(srv.port, text('other source'), { token: WRITER, from: '127.0.0.6' })).status).toBe(
      202,
    );
  });

  it('the token is checked before a byte of the body is read: a 10 MB body with a bad token gets 401 at once, and none of it is held', async () => {
    const srv = await serve({});
    for (const token of ['holt_guessed', undefined]) {
      const c = await open(srv.port);
      // The head alone: the reply comes before the body is sent (the old ingress read the body first).
      c.socket.write(head({ length: 10 * 1024 * 1024, ...(token ? { token } : {}) }));
      await eventually('the 401', () => /^HTTP\/1\.1 401 /.test(c.data()));
      // Nor is it read after: the connection closes, whatever the client still sends.
      c.socket.write(Buffer.alloc(10 * 1024 * 1024, 'x'));
      await c.closed;
    }
    expect(srv.metrics.bodyBytes).toBe(0);
    // The same with a valid token reads (and holds) its body: the counter counts.
    expect((await post(srv.port, text('read'), { token: WRITER })).status).toBe(202);
    expect(srv.metrics.bodyBytes).toBe(text('read').length);
  });

  it('failed authentications are limited per source: 429 with Retry-After, for any token, while another source is served', async () => {
    const srv = await serve({ maxAuthFailures: 3, failureWindowMs: 600_000 });
    const codes = [];
    for (let i = 0; i < 4; i++)
      codes.push((await post(srv.port, text('x'), { token: `holt_guess-${i}` })).status);
    expect(codes).toEqual([401, 401, 401, 429]);
    const blocked = await post(srv.port, text('x'), { token: WRITER });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect((await post(srv.port, text('y'), { token: WRITER, from: '127.0.0.7' })).status).toBe(202);
    expect(srv.metrics.refused.auth_limited).toBe(2);
  });

  it('malformed input answers 400 (or 415) with its reason, never 503, and queues nothing', async () => {
    const srv = await serve({});
    const cases: [string, string | Buffer, { path?: string; type?: string }, number, RegExp][] = [
      ['bad % escape', text('x'), { path: '/v1/agents/Wr%zzter/messages' }, 400, /% escape/],
      ['NUL in the role', text('x'), { path: '/v1/agents/Wr%00ter/messages' }, 400, /role/],
      ['deep JSON', `{"data":${'['.repeat(20_000)}${']'.repeat(20_000)}}`, {}, 400, /deeper than 32/],
      ['NUL escape in the text', '{"text":"a\\u0000b"}', {}, 400, /NUL/],
      ['NUL byte in the body', Buffer.from('{"text":"a\0b"}'), {}, 400, /NUL byte/],
      [
        'invalid UTF-8',
        Buffer.concat([Buffer.from('{"text":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
        {},
        400,
        /UTF-8/,
      ],
      ['lone surrogate', '{"text":"\\ud800"}', {}, 400, /surrogate/],
      ['form body', 'text=x', { type: 'application/x-www-form-urlencoded' }, 415, /JSON/],
      ['latin-1 JSON', text('x'), { type: 'application/json; charset=iso-8859-1' }, 415, /UTF-8/],
    ];
    for (const [what, body, o, status, reason] of cases) {
      const r = await post(srv.port, body, { token: WRITER, ...o });
      expect({ what, status: r.status, error: String(r.body.error) }).toEqual({
        what,
        status,
        error: expect.stringMatching(reason),
      });
    }
    // A raw NUL in the request line never reaches the handler: Node's parser answers 400.
    const c = await open(srv.port);
    c.socket.write(`POST /v1/agents/W\0/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`);
    await c.closed;
    expect(c.data()).toMatch(/^HTTP\/1\.1 400 /);
    expect(await queued(srv.instance)).toBe(0);
  });

  it('a standby answers 503 with Retry-After before any token or body is read, and keeps no state of its own', async () => {
    let leader = false;
    const srv = await serve({ maxAuthFailures: 1 }, () => leader);
    const r = await post(srv.port, text('x'), { token: WRITER, key: 'standby-1' });
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(String(r.body.error)).toContain('standby');
    // Guesses at a standby count nowhere: the leader's failure limit is its own.
    for (let i = 0; i < 3; i++)
      expect((await post(srv.port, text('x'), { token: 'holt_guess' })).status).toBe(503);
    expect(srv.metrics.bodyBytes).toBe(0);
    expect(await queued(srv.instance)).toBe(0);
    leader = true;
    expect((await post(srv.port, text('x'), { token: WRITER, key: 'standby-1' })).status).toBe(202);
    expect(srv.metrics.refused.standby).toBe(4);
  });

  it('a source is an IPv4 address (also IPv4-mapped) or an IPv6 /64; depth is counted outside strings (pure)', () => {
    expect(sourceOf('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(sourceOf('10.1.2.3')).toBe('10.1.2.3');
    expect(sourceOf('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(sourceOf('2001:db8:1:2::9')).toBe('2001:db8:1:2::/64');
    expect(sourceOf('2001:DB8::1')).toBe('2001:db8:0:0::/64');
    expect(tooDeep(`${'['.repeat(32)}${']'.repeat(32)}`)).toBe(false);
    expect(tooDeep(`${'['.repeat(33)}${']'.repeat(33)}`)).toBe(true);
    expect(tooDeep(`{"a":"${'['.repeat(100)}\\"["}`)).toBe(false);
  });
});
