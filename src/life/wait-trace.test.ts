import { randomUUID } from 'node:crypto';
import { context, trace } from '@opentelemetry/api';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSpansToJaeger, type JaegerSpans } from '../../test/harness/jaeger-spans.ts';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { eventually } from '../../test/harness/wait.ts';
import { createPool } from '../common/pg.ts';
import { migrate } from '../state/migrate.ts';
import { TRACER_NAME } from '../telemetry/tracing.ts';
import { labelsOf } from './labels.ts';
import { LifeStore } from './store.ts';
import { emitWaitSpans } from './wait-trace.ts';

// A living agent's wait keeps the trace of the tool call that set it (Postgres, across pups): its
// span is written when it ends, and the turn it wakes continues that trace. Spans are read back from
// a real Jaeger.
let jaeger: JaegerSpans;
let postgres: PostgresServer;
let life: LifeStore;
let pool: pg.Pool;
const I = 'wait-trace';
const ROLE = 'coder';

beforeAll(async () => {
  jaeger = await exportSpansToJaeger('pup');
  postgres = await startPostgres();
  await migrate(postgres.url);
  pool = createPool(postgres.url, { max: 4 });
  life = new LifeStore(pool);
});
afterAll(async () => {
  await pool?.end();
  await postgres?.stop();
  await jaeger?.stop();
});

describe('a life wait as a span', () => {
  it('set inside a tool call, ended by its timer: a span under the call, and the woken turn continues its trace', async () => {
    await life.setState(I, ROLE, 'running');
    await life.enqueue({
      instance: I,
      role: ROLE,
      key: randomUUID(),
      kind: 'message',
      body: 'wait a moment, then carry on',
      labels: labelsOf('operator', 'message', 'holt life send', 'operator'),
    });
    const first = await life.step(I, ROLE, 'pup-1', 30_000);
    expect(first.decision.kind).toBe('start');
    const fence = first.fence!;

    // The model's `wait` tool call, as a turn runs it: inside its execute_tool span.
    const call = trace.getTracer(TRACER_NAME).startSpan('execute_tool wait');
    const deadlineMs = Date.now() + 300;
    await context.with(trace.setSpan(context.active(), call), () =>
      life.addWait(fence, ROLE, { kind: 'timer', on: '0.3 s', deadlineMs }),
    );
    call.end();
    await life.finish(fence, { status: 'done' });

    const woken = await eventually('the timer to wake a turn', async () => {
      const c = await life.step(I, ROLE, 'pup-2', 30_000);
      return c.decision.kind === 'start' ? c : undefined;
    });
    const [ended] = woken.endedWaits ?? [];
    const callCtx = call.spanContext();
    expect(ended).toMatchObject({ kind: 'timer', outcome: 'resolved' });
    expect(ended?.trace?.traceparent).toBe(`00-${callCtx.traceId}-${callCtx.spanId}-01`);
    expect(ended!.endMs).toBeGreaterThanOrEqual(deadlineMs - 50);
    // The woken turn (no message of its own) continues the wait's trace; a resume reads it back.
    expect(woken.delivery?.trace?.traceparent).toBe(ended?.trace?.traceparent);
    expect((await life.deliveryOf(woken.fence!.turnId))?.trace).toEqual(woken.delivery?.trace);

    emitWaitSpans(ROLE, woken.fence!.turnId, woken.endedWaits!);
    const [span] = await jaeger.named(callCtx.traceId, 'life wait timer');
    expect(span?.parentSpanId).toBe(callCtx.spanId);
    expect(span?.service).toBe('holt-pup');
    expect(span?.attributes).toMatchObject({
      'gen_ai.agent.name': ROLE,
      'holt.wait.kind': 'timer',
      'holt.wait.outcome': 'resolved',
      'holt.life.turn.id': woken.fence!.turnId,
    });
    expect(span!.duration).toBeGreaterThanOrEqual(250_000);
  });

  it('a wait set outside any trace has no span and leaves the woken turn untraced', async () => {
    const role = 'plain';
    await life.setState(I, role, 'running');
    await life.enqueue({
      instance: I,
      role,
      key: randomUUID(),
      kind: 'message',
      body: 'hello',
      labels: labelsOf('operator', 'message', 'holt life send', 'operator'),
    });
    const first = await life.step(I, role, 'pup-1', 30_000);
    await life.addWait(first.fence!, role, { kind: 'timer', on: 'now', deadlineMs: Date.now() + 50 });
    await life.finish(first.fence!, { status: 'done' });
    const woken = await eventually('the timer to wake a turn', async () => {
      const c = await life.step(I, role, 'pup-2', 30_000);
      return c.decision.kind === 'start' ? c : undefined;
    });
    expect(woken.endedWaits?.[0]?.trace).toBeUndefined();
    expect(woken.delivery?.trace).toBeUndefined();
    emitWaitSpans(role, woken.fence!.turnId, woken.endedWaits!);
    // The traced wait of the test above reached Jaeger; none of this agent's did.
    expect(await jaeger.find('holt-pup', 'life wait timer', { 'gen_ai.agent.name': ROLE })).toHaveLength(1);
    expect(await jaeger.find('holt-pup', 'life wait timer', { 'gen_ai.agent.name': role })).toEqual([]);
  });
});
