// The ingress as its own process for bench/ingress/main.ts: the orchestrator's ingress server with its
// default limits, a real Postgres (DATABASE_URL), one token (TOKEN_SHA256, for agent Writer). Prints
// {"port": N} once listening, then a line of its figures every second (connections, refusals, body bytes).
import { silentLogger } from '../../src/common/logger.ts';
import { createPool } from '../../src/common/pg.ts';
import { startIngressServer } from '../../src/ingress/server.ts';
import { LifeStore } from '../../src/life/store.ts';
import { LifeTasks } from '../../src/life/tasks.ts';

const url = process.env.DATABASE_URL;
const sha256 = process.env.TOKEN_SHA256;
if (!url || !sha256) throw new Error('DATABASE_URL and TOKEN_SHA256 are required');
const pool = createPool(url, { max: 10 });
const srv = await startIngressServer({
  instance: 'bench',
  port: 0,
  host: '127.0.0.1',
  life: new LifeStore(pool),
  tasks: new LifeTasks(pool),
  tokens: () => [
    {
      name: 'bench',
      role: 'Writer',
      sha256,
      modes: ['enqueue_message'],
      origin: 'webhook',
      ratePerMinute: 100_000,
      maxPriority: 0,
      callbacks: [],
      createdAtMs: 0,
    },
  ],
  knows: async (role) => role === 'Writer',
  ring: () => undefined,
  log: silentLogger(),
  // Nothing delivers the bench's messages: its own backlog must not be what refuses them.
  limits: { maxUndelivered: 1_000_000 },
});
process.stdout.write(`${JSON.stringify({ port: srv.port })}\n`);
setInterval(() => {
  process.stdout.write(
    `${JSON.stringify({
      connections: srv.connections(),
      refused: srv.metrics.refused,
      body_bytes: srv.metrics.bodyBytes,
      heap_used_mb: Math.round(process.memoryUsage().heapUsed / 1048576),
      heap_total_mb: Math.round(process.memoryUsage().heapTotal / 1048576),
      external_mb: Math.round(process.memoryUsage().external / 1048576),
    })}\n`,
  );
}, 1000).unref();
process.once('SIGTERM', () => {
  void srv
    .close()
    .then(() => pool.end())
    .then(() => process.exit(0));
});
