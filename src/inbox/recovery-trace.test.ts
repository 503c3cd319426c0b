import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSpansToJaeger, type JaegerSpans } from '../../test/harness/jaeger-spans.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { silentLogger } from '../common/logger.ts';
import { migrate } from '../state/migrate.ts';
import { InboxStore } from './store.ts';
import { fakeClaim, ROLE } from './testkit.ts';
import { INBOX_SYSTEM } from './trace.ts';
import { sweep } from './watchdog.ts';

// The watchdog's recoveries (a lease that expired, a worker reported dead) as spans of the claim's
// trace the row carries, read back from a real Jaeger; a row without a trace gets none.
const SERVICE = 'holt-orchestrator';
const CLAIM_SPAN = 'b7ad6b7169203331';
let jaeger: JaegerSpans;
let pg: PostgresServer;
let store: InboxStore;

beforeAll(async () => {
  [pg, jaeger] = await Promise.all([startPostgres(), exportSpansToJaeger('orchestrator')]);
  await migrate(pg.url);
  store = InboxStore.connect(pg.url, { max: 5 });
});
afterAll(async () => {
  await store?.close();
  await pg?.stop();
  await jaeger?.stop();
});

const traceparent = (trace: string) => `00-${trace}-${CLAIM_SPAN}-01`;

/** A row of a new grant of `instance`, claimed by `owner` (its payload carries `trace` when given). */
async function claimed(instance: string, target: string, owner: string, trace?: string) {
  const payload = trace ? { traceparent: traceparent(trace), tracestate: 'holt=1' } : {};
  const { row } = await store.enqueue({
    instance,
    workerTarget: target,
    claimId: fakeClaim().id,
    role: ROLE,
    claimType: 'claim',
    phase: 'exclusive',
    payload,
  });
  const [r] = await store.claim(instance, [target], owner, 1, 600_000);
  expect(r?.id).toBe(row.id);
  return r!;
}

/** Ends a row's lease in the past (what a stalled worker's lease comes to), `agoMs` back. */
async function expire(id: string, agoMs = 1000): Promise<void> {
  await store.pool.query(
    `UPDATE holt.agent_inbox SET lease_expires_at = now() - $2 * interval '1 millisecond' WHERE id = $1`,
    [id, agoMs],
  );
}

describe('watchdog recoveries as spans', () => {
  it('an expired lease taken back is a reclaim span under the claim, the row pending again', async () => {
    const I = 'recovery-expired';
    const TRACE = '1af7651916cd43dd8448eb211c80319c';
    const row = await claimed(I, 'stalled', 'pod-a', TRACE);
    await expire(row.id);
    const s = await sweep(store, { instance: I, maxAttempts: 5, ring: () => undefined, log: silentLogger() });
    expect(s.reclaimed.map((x) => x.id)).toEqual([row.id]);

    const [span, ...more] = await jaeger.named(TRACE, 'reclaim stalled');
    expect(more).toEqual([]);
    expect(span?.parentSpanId).toBe(CLAIM_SPAN);
    expect(span?.service).toBe(SERVICE);
    expect(span?.attributes).toMatchObject({
      'span.kind': 'internal',
      'messaging.system': INBOX_SYSTEM,
      'messaging.destination.name': 'stalled',
      'messaging.message.id': row.id,
      'gen_ai.agent.name': ROLE,
      'holt.claim.id': row.claim_id,
      'holt.inbox.attempt': 1,
      'holt.inbox.epoch': row.turn_epoch,
      'holt.inbox.owner': 'pod-a',
      'holt.inbox.recovery': 'lease_expired',
      'holt.inbox.outcome': 'retry',
      'error.type': 'lease_expired',
    });
    expect(Object.keys(span?.attributes ?? {}).filter((k) => k.startsWith('holt.worker.exit'))).toEqual([]);
  });

  it('a worker reported dead: worker_exited with the exit fields (never its logs), failed for good when out of attempts', async () => {
    const I = 'recovery-exited';
    const TRACE = '2af7651916cd43dd8448eb211c80319c';
    const row = await claimed(I, 'killed', 'pod-b', TRACE);
    const report = {
      owner: 'pod-b',
      role: ROLE,
      exit_code: 137,
      signal: 'SIGKILL',
      reason: 'OOMKilled',
      logs: 'last words: token=hunter2',
      // It died after it took the row (the row's own clock, so no race with this process's).
      at_ms: row.updated_at.getTime() + 1,
    };
    let reads = 0;
    const exits = async () => (reads++ === 0 ? [report] : []);
    const s = await sweep(store, { instance: I, maxAttempts: 1, ring: () => undefined, exits });
    expect(s.exited).toBe(1);
    expect(s.reclaimed.map((x) => [x.id, x.status])).toEqual([[row.id, 'failed']]);

    const [span] = await jaeger.named(TRACE, 'reclaim killed');
    expect(span?.parentSpanId).toBe(CLAIM_SPAN);
    expect(span?.attributes).toMatchObject({
      'span.kind': 'internal',
      'messaging.system': INBOX_SYSTEM,
      'messaging.destination.name': 'killed',
      'messaging.message.id': row.id,
      'gen_ai.agent.name': ROLE,
      'holt.claim.id': row.claim_id,
      'holt.inbox.attempt': 1,
      'holt.inbox.owner': 'pod-b',
      'holt.inbox.recovery': 'worker_exited',
      'holt.inbox.outcome': 'failed',
      'holt.worker.exit.code': 137,
      'holt.worker.exit.signal': 'SIGKILL',
      'holt.worker.exit.reason': 'OOMKilled',
      'holt.worker.exit.at_ms': report.at_ms,
      'error.type': 'worker_exited',
    });
    expect(JSON.stringify(span)).not.toContain('hunter2');
  });

  it('a row without a trace gets no span (the watchdog starts no trace of its own)', async () => {
    const I = 'recovery-untraced';
    const TRACE = '3af7651916cd43dd8448eb211c80319c';
    const bare = await claimed(I, 'bare', 'pod-c');
    const control = await claimed(I, 'control', 'pod-c', TRACE);
    // The bare row expired first: the reclaim takes it back before the traced one.
    await expire(bare.id, 2000);
    await expire(control.id, 1000);
    const s = await sweep(store, { instance: I, maxAttempts: 5, ring: () => undefined });
    expect(s.reclaimed.map((x) => x.id)).toEqual([bare.id, control.id]);

    // The traced row's span arrived, and everything ended so far is exported: the bare row has none.
    await jaeger.named(TRACE, 'reclaim control');
    expect(await jaeger.find(SERVICE, 'reclaim bare')).toEqual([]);
    expect(await jaeger.find(SERVICE, 'reclaim control', { 'messaging.message.id': bare.id })).toEqual([]);
  });
});
