// Living agents benchmark: the ingress's rate (HTTP requests through token check, rate limit, schema,
// idempotent insert into Postgres) with C concurrent clients, and the scheduler's step (one transaction:
// lock, snapshot, decide, deliver, lease, audit) as a start decision and as an idle one.
// Usage: node bench/life/main.ts [--requests 3000] [--clients 16] [--steps 300]. Prints JSON.
import { parseArgs } from 'node:util';
import { hashToken } from '../../src/access/tokens.ts';
import { silentLogger } from '../../src/common/logger.ts';
import { createPool } from '../../src/common/pg.ts';
import { percentile } from '../../src/inbox/policy.ts';
import { startIngressServer } from '../../src/ingress/server.ts';
import { labelsOf } from '../../src/life/labels.ts';
import { LifeStore } from '../../src/life/store.ts';
import { LifeTasks } from '../../src/life/tasks.ts';
import { startPostgres } from '../../src/local/postgres.ts';
import { migrate } from '../../src/state/migrate.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '3000' },
    clients: { type: 'string', default: '16' },
    steps: { type: 'string', default: '300' },
  },
});
const N = Number(values.requests);
const C = Number(values.clients);
const STEPS = Number(values.steps);
const I = 'bench';
const TOKEN = 'holt_bench-token-0123456789abcdef';

const pgs = await startPostgres('holt_bench_life');
const pool = createPool(pgs.url, { max: 20 });
try {
  await migrate(pgs.url);
  const life = new LifeStore(pool);
  const srv = await startIngressServer({
    instance: I,
    port: 0,
    host: '127.0.0.1',
    life,
    tasks: new LifeTasks(pool),
    tokens: () => [
      {
        name: 'bench',
        role: 'Writer',
        sha256: hashToken(TOKEN),
        modes: ['enqueue_message', 'wake_hint'],
        origin: 'webhook',
        ratePerMinute: 100_000,
        maxPriority: 0,
        callbacks: [],
        createdAtMs: 0,
      },
    ],
    knows: async () => true,
    ring: () => undefined,
    log: silentLogger(),
    // Nothing delivers these: the backlog cap would stop the run, so it is raised past its length.
    limits: { maxUndelivered: N + 1000 },
  });
  const url = `http://127.0.0.1:${srv.port}/v1/agents/Writer/messages`;
  const post = async (i: number) => {
    const t = performance.now();
    const r = await fetch(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'idempotency-key': `k${i}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ text: `message ${i}` }),
    });
    await r.arrayBuffer();
    if (r.status !== 202) throw new Error(`request ${i}: ${r.status}`);
    return performance.now() - t;
  };
  for (let i = 0; i < 100; i++) await post(-1 - i); // warm-up
  let next = 0;
  const lat: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      for (let i = next++; i < N; i = next++) lat.push(await post(i));
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  await srv.close();

  // The scheduler: a start that delivers one message (lease taken), then the turn ended, and an idle pass.
  const start: number[] = [];
  const idle: number[] = [];
  const role = 'Stepper';
  for (let i = 0; i < STEPS; i++) {
    await life.enqueue({
      instance: I,
      role,
      key: `s${i}`,
      kind: 'message',
      body: 'x',
      labels: labelsOf('webhook', 'message', 'bench', 'token bench'),
    });
    let t = performance.now();
    const c = await life.step(I, role, 'bench', 30_000);
    start.push(performance.now() - t);
    if (c.decision.kind !== 'start' || !c.fence) throw new Error(`step ${i}: ${c.decision.kind}`);
    await life.finish(c.fence, { status: 'done' });
    t = performance.now();
    const d = await life.step(I, role, 'bench', 30_000);
    idle.push(performance.now() - t);
    if (d.decision.kind !== 'sleep') throw new Error(`idle step ${i}: ${d.decision.kind}`);
  }
  const ms = (xs: number[], p: number) =>
    Math.round(
      percentile(
        [...xs].sort((a, b) => a - b),
        p,
      ) * 100,
    ) / 100;
  process.stdout.write(
    `${JSON.stringify(
      {
        ingress: {
          requests: N,
          clients: C,
          per_s: Math.round(N / secs),
          p50_ms: ms(lat, 50),
          p99_ms: ms(lat, 99),
        },
        scheduler_step: {
          steps: STEPS,
          start_p50_ms: ms(start, 50),
          start_p99_ms: ms(start, 99),
          idle_p50_ms: ms(idle, 50),
          idle_p99_ms: ms(idle, 99),
        },
      },
      null,
      2,
    )}\n`,
  );
} finally {
  await pool.end();
  await pgs.stop();
}
