// The valid caller of bench/ingress/main.ts, in a process of its own (so the flood's sockets in the
// bench's process do not delay it): a well-formed message with a valid token, on a new connection from
// 127.0.0.1 every EVERY_MS for SECONDS. Prints the statuses and latencies as one JSON line.
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

const port = Number(process.env.PORT);
const token = process.env.TOKEN ?? '';
const seconds = Number(process.env.SECONDS ?? '60');
const everyMs = Number(process.env.EVERY_MS ?? '100');
const prefix = process.env.KEY_PREFIX ?? 'm';

let seq = 0;
/** One message on its own connection (as a webhook sends one): its status (0: no answer) and time. */
export function message(
  to = port,
  bearer = token,
  key = `${prefix}-${++seq}`,
): Promise<{ status: number; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: to,
        method: 'POST',
        path: '/v1/agents/Writer/messages',
        localAddress: '127.0.0.1',
        agent: false,
        headers: {
          authorization: `Bearer ${bearer}`,
          'idempotency-key': key,
          'content-type': 'application/json',
        },
        timeout: 30_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, ms: performance.now() - t0 }));
    req.end(JSON.stringify({ text: `build ${key} finished` }));
  });
}

if (process.env.PORT) {
  const t0 = Date.now();
  const results: { status: number; ms: number }[] = [];
  while (Date.now() - t0 < seconds * 1000) {
    results.push(await message());
    await sleep(everyMs);
  }
  process.stdout.write(`${JSON.stringify(results)}\n`);
}
