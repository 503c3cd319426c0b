// The ingress under hostile callers: an ingress process (bench/ingress/server.ts, default limits, real
// Postgres) faces `--connections` slow or abusive connections, kept up for `--seconds` (each one the
// server closes is opened again after `--reconnect-ms`), from `--sources` addresses 127.0.0.2 and up:
// heads that never end, idle sockets, 10 MB bodies behind a wrong token (dribbled), token guessers.
// Meanwhile a well-formed message with a valid token is posted from 127.0.0.1 every `--every-ms`.
// Prints JSON: the ingress process's RSS idle and at its peak, what it refused, and the valid client's
// accepted count and latency. Traffic goes to 127.0.0.1 only.
// Usage: node bench/ingress/main.ts [--connections 10000] [--seconds 60] [--sources 40]
//   [--reconnect-ms 3000] [--every-ms 100] [--kinds slow_head,idle,bad_token_body,guesser]. Needs `ulimit -n` above the connections (it raises its
//   own soft limit to the hard one when it can).
import { spawn, spawnSync } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { hashToken } from '../../src/access/tokens.ts';
import { startPostgres } from '../../src/local/postgres.ts';
import { migrate } from '../../src/state/migrate.ts';
import { pct, round, rssMb } from '../lib/proc.ts';
import { message } from './client.ts';

const { values } = parseArgs({
  options: {
    connections: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '60' },
    sources: { type: 'string', default: '40' },
    'reconnect-ms': { type: 'string', default: '3000' },
    'every-ms': { type: 'string', default: '100' },
    kinds: { type: 'string', default: 'slow_head,idle,bad_token_body,guesser' },
    'node-flags': { type: 'string', default: '' },
  },
});
const N = Number(values.connections);
const SECONDS = Number(values.seconds);
const SOURCES = Math.min(250, Number(values.sources));
const RECONNECT_MS = Number(values['reconnect-ms']);
const EVERY_MS = Number(values['every-ms']);

// Each held connection is a descriptor here: raise the soft limit (a re-exec under `ulimit -n`).
const fdLimit = (which: 'soft' | 'hard') => {
  const line = /^Max open files\s+(\S+)\s+(\S+)/m.exec(
    spawnSync('cat', ['/proc/self/limits'], { encoding: 'utf8' }).stdout,
  );
  const v = line?.[which === 'soft' ? 1 : 2] ?? '0';
  return v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v);
};
const need = N + 2000;
if (fdLimit('soft') < need && !process.env.HOLT_BENCH_ULIMIT) {
  if (fdLimit('hard') < need) {
    process.stderr.write(
      `needs ${need} open files; the hard limit is ${fdLimit('hard')} (raise it, or lower --connections)\n`,
    );
    process.exit(2);
  }
  const r = spawnSync(
    'sh',
    [
      '-c',
      `ulimit -n ${need} && exec "$0" "$@"`,
      process.execPath,
      ...process.execArgv,
      ...process.argv.slice(1),
    ],
    { stdio: 'inherit', env: { ...process.env, HOLT_BENCH_ULIMIT: '1' } },
  );
  process.exit(r.status ?? 1);
}

const TOKEN = 'holt_bench-ingress-token-0123456789abcdef';
const pgs = await startPostgres('holt_bench_ingress');
await migrate(pgs.url);
// --node-flags: V8 flags for the ingress process (e.g. --max-semi-space-size=1), to compare.
const server = spawn(
  process.execPath,
  [
    ...process.execArgv,
    ...values['node-flags'].split(' ').filter(Boolean),
    new URL('./server.ts', import.meta.url).pathname,
  ],
  {
    env: { ...process.env, DATABASE_URL: pgs.url, TOKEN_SHA256: hashToken(TOKEN) },
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
const lines = createInterface({ input: server.stdout! });
let figures: { connections: number; refused: Record<string, number>; body_bytes: number } | undefined;
let connectionsPeak = 0;
const port = await new Promise<number>((resolve) => {
  lines.on('line', (l) => {
    const j = JSON.parse(l) as { port?: number } & typeof figures;
    if (j.port) resolve(j.port);
    else if (j) {
      if (process.env.BENCH_TRACE) process.stderr.write(`${l}\n`);
      figures = j;
      connectionsPeak = Math.max(connectionsPeak, j.connections);
    }
  });
});

// Idle: after a warm-up, the ingress process's resident memory.
for (let i = 0; i < 200; i++) await message(port, TOKEN, `warm-${i}`);
await sleep(2000);
let idle = 0;
for (let i = 0; i < 10; i++) {
  idle = Math.max(idle, rssMb(server.pid));
  await sleep(100);
}

// The attack.
const KINDS = values.kinds.split(',') as ('slow_head' | 'idle' | 'bad_token_body' | 'guesser')[];
let stop = false;
let opened = 0;
let open = 0;
let openPeak = 0;
const headOf = (token: string, length: number) =>
  `POST /v1/agents/Writer/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nIdempotency-Key: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
function attacker(i: number): void {
  if (stop) return;
  const kind = KINDS[i % KINDS.length]!;
  const s: Socket = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + (i % SOURCES)}` });
  opened++;
  open++;
  openPeak = Math.max(openPeak, open);
  let timer: NodeJS.Timeout | undefined;
  s.on('error', () => undefined);
  s.on('data', () => undefined);
  s.once('connect', () => {
    if (kind === 'slow_head') {
      s.write('POST /v1/agents/Writer/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      timer = setInterval(() => s.write('X-Slow: 1\r\n'), 2000);
    } else if (kind === 'bad_token_body') {
      s.write(headOf(`holt_wrong-${i}`, 10 * 1024 * 1024));
      const chunk = Buffer.alloc(16 * 1024, 'x');
      timer = setInterval(() => s.write(chunk), 200);
    } else if (kind === 'guesser') {
      const body = '{"text":"guess"}';
      timer = setInterval(() => s.write(`${headOf(`holt_guess-${i}`, body.length)}${body}`), 2000);
    }
  });
  s.once('close', () => {
    open--;
    clearInterval(timer);
    setTimeout(() => attacker(i), RECONNECT_MS * (0.5 + Math.random())).unref();
  });
  all.add(s);
  s.once('close', () => all.delete(s));
}
const all = new Set<Socket>();
let peak = idle;
const sampler = setInterval(() => {
  peak = Math.max(peak, rssMb(server.pid));
}, 100);
// Opened in batches, as a flood ramps up (and so the bench's own SYNs are not all dropped at once).
void (async () => {
  for (let i = 0; i < N && !stop; i += 250) {
    for (let j = i; j < Math.min(N, i + 250); j++) attacker(j);
    await sleep(50);
  }
})();
const client = spawn(
  process.execPath,
  [...process.execArgv, new URL('./client.ts', import.meta.url).pathname],
  {
    env: { ...process.env, PORT: String(port), TOKEN, SECONDS: String(SECONDS), EVERY_MS: String(EVERY_MS) },
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
let out = '';
client.stdout!.on('data', (c: Buffer) => {
  out += c.toString();
});
await new Promise((r) => client.once('exit', r));
const results = JSON.parse(out) as { status: number; ms: number }[];
stop = true;
clearInterval(sampler);
const atEnd = figures;
for (const s of all) s.destroy();
server.kill('SIGTERM');
await new Promise((r) => server.once('exit', r));
await pgs.stop();

const accepted = results.filter((r) => r.status === 202);
const others: Record<string, number> = {};
for (const r of results) if (r.status !== 202) others[String(r.status)] = (others[String(r.status)] ?? 0) + 1;
process.stdout.write(
  `${JSON.stringify(
    {
      attack: {
        connections: N,
        seconds: SECONDS,
        sources: SOURCES,
        opened,
        client_open_peak: openPeak,
      },
      ingress_process: {
        rss_idle_mb: idle,
        rss_peak_mb: peak,
        rss_peak_over_idle_mb: round(peak - idle, 1),
        connections_peak: connectionsPeak,
        refused: atEnd?.refused,
        body_bytes_read: atEnd?.body_bytes,
      },
      valid_messages: {
        sent: results.length,
        accepted: accepted.length,
        refused_or_failed: others,
        p50_ms: pct(
          accepted.map((r) => r.ms),
          50,
        ),
        p99_ms: pct(
          accepted.map((r) => r.ms),
          99,
        ),
        max_ms: round(Math.max(...accepted.map((r) => r.ms))),
      },
    },
    null,
    2,
  )}\n`,
);
process.exit(0);
