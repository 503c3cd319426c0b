// Tries a TCP connection to each target and reports which opened: as a Holt tool (the default),
// or as a plain JSON line (--plain, for a control run from a pod no policy restricts).
// Usage: node net-probe.mjs '<json: [{name, host, port}]>' [--plain]
import { connect } from 'node:net';

const targets = JSON.parse(process.argv[2] ?? '[]');
const plain = process.argv.includes('--plain');

const attempt = (t) =>
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

const results = await Promise.all(targets.map(attempt));
const report = Object.fromEntries(results.map((r) => [r.name, r]));
if (plain) process.stdout.write(`${JSON.stringify(report)}\n`);
else
  process.stdout.write(
    `${JSON.stringify({
      artefact_type: 'NetProbe',
      artefact_payload: JSON.stringify(report),
      summary: `${results.filter((r) => r.ok).length}/${results.length} reachable`,
      structural_type: 'Terminal',
    })}\n`,
  );
process.exit(0);
