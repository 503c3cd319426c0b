// Inbox benchmark: claim+complete rate of the inbox (K concurrent workers) next to a raw
// `FOR UPDATE SKIP LOCKED` loop on the same Postgres, and doorbell → row claimed latency.
// Usage: node bench/inbox/main.ts [--rows 4000] [--workers 8] [--samples 300]. Prints JSON.
import { parseArgs } from 'node:util';
import pg from 'pg';
import { connectBus } from '../../src/bus/connect.ts';
import { ringDoorbell } from '../../src/bus/doorbell.ts';
import { silentLogger } from '../../src/common/logger.ts';
import { percentile } from '../../src/inbox/policy.ts';
import { InboxStore } from '../../src/inbox/store.ts';
import { fakeClaim } from '../../src/inbox/testkit.ts';
import { InboxWorker } from '../../src/inbox/worker.ts';
import { startNats } from '../../src/local/nats.ts';
import { startPostgres } from '../../src/local/postgres.ts';
import { migrate } from '../../src/state/migrate.ts';
import { fenceOf } from '../../src/state/schema.ts';
import { eventually } from '../../test/harness/wait.ts';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '4000' },
    workers: { type: 'string', default: '8' },
    samples: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '3' },
  },
});
const ROUNDS = Number(values.rounds);
/** Share of one core the benchmark process itself used during the inbox rounds (zod, pg protocol). */
const clientCpu: number[] = [];
const ROWS = Number(values.rows);
const K = Number(values.workers);
const SAMPLES = Number(values.samples);
const I = 'bench';

const [pgs, nats] = await Promise.all([startPostgres('holt_bench'), startNats()]);
try {
  await migrate(pgs.url);
  // Interleaved rounds, medians: the machine is shared, so one run of each would compare noise.
  const raws: number[] = [];
  const inboxes: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    raws.push(await rawRate(pgs.url, round));
    inboxes.push(await inboxRate(pgs.url, round));
  }
  const median = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  const raw = median(raws);
  const inbox = median(inboxes);
  const latency = await doorbellLatency(pgs.url, nats.url);
  const r = (n: number) => Math.round(n * 100) / 100;
  process.stdout.write(
    `${JSON.stringify(
      {
        rows: ROWS,
        workers: K,
        rounds: ROUNDS,
        raw_rounds_per_s: raws.map(Math.round),
        inbox_rounds_per_s: inboxes.map(Math.round),
        raw_skip_locked_per_s: r(raw),
        inbox_claim_complete_per_s: r(inbox),
        ratio: r(inbox / raw),
        inbox_client_cpu_share: clientCpu.map(r),
        ratio_target: 0.8,
        doorbell_to_claim_ms: { samples: SAMPLES, ...latency },
        latency_target_p99_ms: 10,
      },
      null,
      2,
    )}\n`,
  );
} finally {
  await Promise.all([pgs.stop(), nats.stop()]);
}

/** K loops, each: claim one row (SKIP LOCKED, with a lease), then mark it done. */
async function rawRate(url: string, round: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: url, max: K });
  await pool.query('DROP TABLE IF EXISTS bench_raw');
  await pool.query(`CREATE TABLE bench_raw (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending', payload jsonb NOT NULL DEFAULT '{}', lease_owner text,
    lease_expires_at timestamptz, created_at timestamptz NOT NULL DEFAULT now())`);
  await pool.query(`CREATE INDEX ON bench_raw (id) WHERE status = 'pending'`);
  await pool.query(`INSERT INTO bench_raw (payload) SELECT '{"x":1}' FROM generate_series(1, $1)`, [ROWS]);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: K }, async (_, w) => {
      for (;;) {
        // Prepared statements, as the inbox uses: the comparison is of the SQL, not of parse/plan time.
        const r = await pool.query({
          name: 'raw_claim',
          text: `UPDATE bench_raw SET status = 'claimed', lease_owner = $1, lease_expires_at = now() + interval '30 s'
           WHERE id = (SELECT id FROM bench_raw WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
           RETURNING id`,
          values: [`w${w}`],
        });
        if (!r.rows[0]) return;
        await pool.query({
          name: 'raw_complete',
          text: `UPDATE bench_raw SET status = 'done' WHERE id = $1 AND lease_owner = $2`,
          values: [r.rows[0].id, `w${w}`],
        });
      }
    }),
  );
  const rate = ROWS / ((performance.now() - t0) / 1000);
  void round;
  await pool.end();
  return rate;
}

/** The same loop through the inbox: claim under a lease (epoch bump), complete under the fence. */
async function inboxRate(url: string, round: number): Promise<number> {
  const target = `rate${round}`;
  const store = InboxStore.connect(url, { max: K + 2 });
  for (let i = 0; i < ROWS; i += 100)
    await Promise.all(
      Array.from({ length: Math.min(100, ROWS - i) }, () =>
        store.enqueue({
          instance: I,
          workerTarget: target,
          claimId: fakeClaim().id,
          role: 'r',
          claimType: 'claim',
          phase: 'parallel',
        }),
      ),
    );
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let done = 0;
  await Promise.all(
    Array.from({ length: K }, async (_, w) => {
      for (;;) {
        const [row] = await store.claim(I, [target], `w${w}`, 1, 30_000);
        if (!row) return;
        await store.complete(fenceOf(row), { value: { ok: true } }); // FenceLostError when refused
        done++;
      }
    }),
  );
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  clientCpu.push((cpu.user + cpu.system) / 1000 / wall);
  const rate = done / (wall / 1000);
  await store.close();
  return rate;
}

/** One idle worker; a row is enqueued silently, then its doorbell rung: time until the worker holds it. */
async function doorbellLatency(url: string, natsUrl: string) {
  const store = InboxStore.connect(url, { max: 4 });
  const nc = await connectBus(natsUrl, 'bench');
  let rungAt = 0;
  const lat: number[] = [];
  const worker = new InboxWorker({
    store,
    nc,
    instance: I,
    targets: ['latency'],
    concurrency: 1,
    log: silentLogger(),
    execute: async () => {
      lat.push(performance.now() - rungAt);
      return null;
    },
  });
  await worker.start();
  for (let i = 0; i < SAMPLES; i++) {
    await store.enqueue({
      instance: I,
      workerTarget: 'latency',
      claimId: fakeClaim().id,
      role: 'r',
      claimType: 'claim',
      phase: 'parallel',
    });
    rungAt = performance.now();
    ringDoorbell(nc, I, 'latency', 'enqueue');
    await eventually('claim', () => lat.length === i + 1 && worker.inFlight === 0);
  }
  await worker.stop();
  await nc.drain();
  await store.close();
  const s = [...lat].sort((a, b) => a - b);
  const r = (n: number) => Math.round(n * 100) / 100;
  return { p50: r(percentile(s, 50)), p99: r(percentile(s, 99)), max: r(s[s.length - 1] ?? 0) };
}
