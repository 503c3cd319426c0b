import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSpansToJaeger, type JaegerSpans } from '../../test/harness/jaeger-spans.ts';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import type { Claim } from '../blackboard/types.ts';
import { connectBus } from '../bus/connect.ts';
import { silentLogger } from '../common/logger.ts';
import { InboxDispatcher } from '../orchestrator/inbox-dispatcher.ts';
import { migrate } from '../state/migrate.ts';
import { invokeAgent } from '../telemetry/spans.ts';
import { InboxStore } from './store.ts';
import { fakeClaim, ROLE } from './testkit.ts';
import { INBOX_SYSTEM } from './trace.ts';
import { InboxWorker } from './worker.ts';

// Each attempt at an inbox row is a span of its claim's trace, carried through Postgres on the row;
// the spans are read back from a real Jaeger.
const I = 'inbox-trace';
const TARGET = 'traced';
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const CLAIM_SPAN = 'b7ad6b7169203331';
let jaeger: JaegerSpans;
let pg: PostgresServer;
let nats: NatsServer;
let store: InboxStore;
let nc: NatsConnection;

beforeAll(async () => {
  [pg, nats, jaeger] = await Promise.all([startPostgres(), startNats(), exportSpansToJaeger('worker')]);
  await migrate(pg.url);
  store = InboxStore.connect(pg.url, { max: 5 });
  nc = await connectBus(nats.url, 'inbox-trace-test');
});
afterAll(async () => {
  await nc?.drain();
  await store?.close();
  await Promise.all([pg?.stop(), nats?.stop()]);
  await jaeger?.stop();
});

/** A worker of one grant, as a fresh_per_call Job pod runs it; its first attempt fails when asked. */
function worker(fail: boolean) {
  return new InboxWorker({
    store,
    nc,
    instance: I,
    targets: [TARGET],
    concurrency: 1,
    retry: { maxAttempts: 3, baseDelayMs: 0, maxDelayMs: 0 },
    log: silentLogger(),
    execute: (row) =>
      invokeAgent(ROLE, { id: row.claim_id, traceparent: `00-${TRACE}-${CLAIM_SPAN}-01` }, {}, async () => {
        if (fail) throw new Error('tool crashed');
        return 'ok';
      }),
  });
}

describe('inbox attempts as spans', () => {
  it('a row carries its claim trace; each attempt is a consumer span with its outcome, the agent under it', async () => {
    const claim: Claim = {
      ...fakeClaim(),
      status: 'pending_exclusive',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: ROLE,
      traceparent: `00-${TRACE}-${CLAIM_SPAN}-01`,
      tracestate: 'holt=1',
    };
    const d = new InboxDispatcher({ store, instance: I, targetOf: () => TARGET, ring: () => undefined });
    await d.dispatch({ claim, role: ROLE, claimType: 'claim', phase: 'exclusive' });
    const { rows } = await store.pool.query<{ payload: Record<string, unknown> }>(
      'SELECT payload FROM holt.agent_inbox WHERE instance = $1 AND claim_id = $2',
      [I, claim.id],
    );
    expect(rows[0]?.payload).toMatchObject({ traceparent: claim.traceparent, tracestate: 'holt=1' });

    expect(await worker(true).runGrant(claim.id, ROLE)).toBe('retry');
    expect(await worker(false).runGrant(claim.id, ROLE)).toBe('done');

    const attempts = (await jaeger.named(TRACE, `process ${TARGET}`, 2)).sort(
      (a, b) => a.startTime - b.startTime,
    );
    expect(attempts).toHaveLength(2);
    for (const a of attempts) {
      expect(a.parentSpanId).toBe(CLAIM_SPAN);
      expect(a.attributes).toMatchObject({
        'span.kind': 'consumer',
        'messaging.system': INBOX_SYSTEM,
        'messaging.operation.type': 'process',
        'messaging.destination.name': TARGET,
        'gen_ai.agent.name': ROLE,
        'holt.claim.id': claim.id,
      });
    }
    const [first, second] = attempts;
    expect(first?.attributes).toMatchObject({
      'holt.inbox.attempt': 1,
      'holt.inbox.outcome': 'retry',
      'error.type': 'claim_retry',
    });
    expect(second?.attributes).toMatchObject({ 'holt.inbox.attempt': 2, 'holt.inbox.outcome': 'done' });
    expect(second?.attributes['error.type']).toBeUndefined();
    expect(Number(second?.attributes['holt.inbox.epoch'])).toBeGreaterThan(
      Number(first?.attributes['holt.inbox.epoch']),
    );
    // The agent's invocation nests under the attempt that ran it.
    const agents = (await jaeger.named(TRACE, `invoke_agent ${ROLE}`, 2)).sort(
      (a, b) => a.startTime - b.startTime,
    );
    expect(agents.map((s) => s.parentSpanId)).toEqual(attempts.map((a) => a.spanId));
  });
});
