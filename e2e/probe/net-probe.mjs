// Tries each target and reports which answered: as a Holt tool (the default), or as a plain JSON line
// (--plain, for a control run from a pod no policy restricts). A target is a TCP connection
// ({name, host, port}), a DNS query sent straight to a server ({name, dns: ip, query}: any answer
// counts, so a name that exists nowhere still carries data out), or a lookup through the pod's own
// resolver ({name, resolve: hostname}).
// Usage: node net-probe.mjs '<json: [target…]>' [--plain] [--type=ArtefactType]
import { createSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { connect } from 'node:net';

const targets = JSON.parse(process.argv[2] ?? '[]');
const plain = process.argv.includes('--plain');
const type = process.argv.find((a) => a.startsWith('--type='))?.slice('--type='.length) ?? 'NetProbe';

const tcp = (t) =>
  new Promise((resolve) => {
    const s = connect({ host: t.host, port: t.port });
    const done = (ok, error) => {
      s.destroy();
      resolve({ name: t.name, ok, ...(error ? { error } : {}) });
    };
    s.setTimeout(4000, () => done(false, 'timeout'));
    s.on('connect', () => done(true));
    s.on('error', (e) => done(false, e.code ?? e.message));
  });

/** One A query for `name`, by hand: id, recursion desired, one question. */
function query(name) {
  const labels = name.split('.').filter(Boolean);
  const qname = Buffer.concat([
    ...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)])),
    Buffer.from([0]),
  ]);
  const head = Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([head, qname, Buffer.from([0, 1, 0, 1])]);
}

const dns = (t) =>
  new Promise((resolve) => {
    const s = createSocket(t.dns.includes(':') ? 'udp6' : 'udp4');
    const timer = setTimeout(() => done(false, 'timeout'), 4000);
    const done = (ok, error) => {
      clearTimeout(timer);
      s.close();
      resolve({ name: t.name, ok, ...(error ? { error } : {}) });
    };
    s.on('message', () => done(true));
    s.on('error', (e) => done(false, e.code ?? e.message));
    s.send(query(t.query), 53, t.dns);
  });

const resolver = (t) =>
  Promise.race([
    lookup(t.resolve).then(
      (a) => ({ name: t.name, ok: true, address: a.address }),
      (e) => ({ name: t.name, ok: false, error: e.code ?? e.message }),
    ),
    new Promise((r) => setTimeout(() => r({ name: t.name, ok: false, error: 'timeout' }), 8000)),
  ]);

const attempt = (t) => (t.dns ? dns(t) : t.resolve ? resolver(t) : tcp(t));

const results = await Promise.all(targets.map(attempt));
const report = Object.fromEntries(results.map((r) => [r.name, r]));
if (plain) process.stdout.write(`${JSON.stringify(report)}\n`);
else
  process.stdout.write(
    `${JSON.stringify({
      artefact_type: type,
      artefact_payload: JSON.stringify(report),
      summary: `${results.filter((r) => r.ok).length}/${results.length} reachable`,
      structural_type: 'Terminal',
    })}\n`,
  );
process.exit(0);
