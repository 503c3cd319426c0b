import { headers, type NatsConnection } from '@nats-io/transport-node';
import { context } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { eventually } from '../../test/harness/wait.ts';
import { silentLogger } from '../common/logger.ts';
import { contextFrom, type TraceCarrier } from '../telemetry/carrier.ts';
import { tracingSettings } from '../telemetry/settings.ts';
import { startTracing } from '../telemetry/tracing.ts';
import { busProblem, connectBus, natsServer } from './connect.ts';
import { type Doorbell, ringDoorbell, subscribeDoorbell } from './doorbell.ts';
import { natsAgentEvents, TaskEvent } from './events.ts';
import { traceOf } from './message.ts';
import { agentEventSubject, assertWorkerTarget, doorbellSubject, toolRequestSubject } from './subjects.ts';
import { newReplyId, publishToolRequest } from './tools.ts';

let nats: NatsServer;
let nc: NatsConnection;
beforeAll(async () => {
  nats = await startNats();
  nc = await connectBus(nats.url, 'bus-test');
});
afterAll(async () => {
  await nc?.drain();
  await nats?.stop();
});

describe('connectBus', () => {
  it('reaches a server whose password starts with digits (nats.js would read them as the port)', async () => {
    const secured = await startNats({ auth: { user: 'holt', pass: '786d0f3a9c' } });
    try {
      expect(natsServer(secured.url)).toEqual({
        servers: `nats://127.0.0.1:${secured.port}`,
        user: 'holt',
        pass: '786d0f3a9c',
      });
      const c = await connectBus(secured.url, 'digits');
      await c.flush();
      await c.close();
      await expect(connectBus(`nats://holt:wrong@127.0.0.1:${secured.port}`, 'bad')).rejects.toThrow(
        /cannot connect to NATS at nats:\/\/holt:\*\*\*@/,
      );
    } finally {
      await secured.stop();
    }
  });
});

describe('subjects', () => {
  it('worker targets are single subject tokens', () => {
    expect(doorbellSubject('worker_generic')).toBe('cmd.agent.worker_generic.wakeup');
    for (const bad of ['a.b', 'a*', '>', 'has space', 'Upper', ''])
      expect(() => assertWorkerTarget(bad), bad).toThrow(/invalid worker target/);
  });
});

describe('doorbells', () => {
  it('each bell reaches one member of the queue group; malformed and foreign bells are ignored', async () => {
    const got: [number, Doorbell][] = [];
    const subs = [0, 1, 2].map((i) => subscribeDoorbell(nc, 'inst', 'pool', (b) => got.push([i, b])));
    const other = await connectBus(nats.url, 'other');
    for (let i = 0; i < 30; i++) ringDoorbell(other, 'inst', 'pool', 'enqueue');
    other.publish(doorbellSubject('pool'), 'not json');
    other.publish(doorbellSubject('pool'), JSON.stringify({ instance: 'inst', target: 'pool' }));
    ringDoorbell(other, 'another-instance', 'pool', 'enqueue');
    ringDoorbell(other, 'inst', 'pool', 'manual'); // the last one: once it is in, all before it are
    await eventually('the last bell', () => got.some(([, b]) => b.reason === 'manual'));
    await other.drain();
    for (const s of subs) s.unsubscribe();
    expect(got).toHaveLength(31);
    expect(got.every(([, b]) => b.instance === 'inst' && b.target === 'pool')).toBe(true);
  });

  it('agent events are validated and published on evt.agent.{actor}.task', async () => {
    const actor = '7b3c5a3e-1f0a-4b0b-9b1e-6a2f7c9d0e11';
    const seen: unknown[] = [];
    const sub = nc.subscribe(agentEventSubject(actor, 'task'), {
      callback: (_e, m) => {
        seen.push(m.json());
      },
    });
    const dropped: string[] = [];
    const ev = natsAgentEvents(nc, (kind) => dropped.push(kind));
    const e = {
      actor_id: actor,
      turn_id: actor,
      turn_epoch: 2,
      at_ms: 1,
      status: 'success' as const,
      claim_id: 'c',
      role: 'r',
      deliverable_id: 'd',
    };
    ev.task(e);
    ev.task({ ...e, turn_epoch: 1.5 }); // invalid: dropped, never sent
    expect(dropped).toEqual(['task']);
    await eventually('the task event', () => seen.length > 0);
    sub.unsubscribe();
    expect(seen.map((x) => TaskEvent.parse(x))).toEqual([e]);
  });
});

describe('trace context on NATS headers', () => {
  it('a bell, an event and a tool request published inside a span carry its traceparent; outside one, none; a forged one is dropped', async () => {
    startTracing('bus-test', tracingSettings({}), silentLogger()); // the context manager, as every program sets
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const got: { subject: string; trace?: TraceCarrier }[] = [];
    const sub = nc.subscribe('>', {
      callback: (_e, m) => {
        if (!m.subject.startsWith('_INBOX')) got.push({ subject: m.subject, trace: traceOf(m) });
      },
    });
    await nc.flush();
    const ev = natsAgentEvents(nc);
    const actor = '7b3c5a3e-1f0a-4b0b-9b1e-6a2f7c9d0e12';
    const step = { actor_id: actor, turn_id: actor, turn_epoch: 1, at_ms: 1, status: 'success' as const };
    const task = { ...step, claim_id: 'c', role: 'r', deliverable_id: 'd' };
    context.with(contextFrom({ traceparent: tp, tracestate: 'v=1' }), () => {
      ringDoorbell(nc, 'inst', 'traced', 'enqueue');
      ev.task(task);
      const call = {
        instance: 'inst',
        role: 'r',
        turn_id: actor,
        tool_call_id: 'c1',
        tool: 'lookup',
        args: {},
      };
      publishToolRequest(nc, { ...call, deadline_ms: 1 }, newReplyId());
    });
    ringDoorbell(nc, 'inst', 'untraced', 'enqueue');
    nc.publish(doorbellSubject('forged'), '{}', { headers: forged() });
    await eventually('five messages', () => got.length >= 5);
    sub.unsubscribe();
    expect(got).toEqual([
      { subject: doorbellSubject('traced'), trace: { traceparent: tp, tracestate: 'v=1' } },
      { subject: agentEventSubject(actor, 'task'), trace: { traceparent: tp, tracestate: 'v=1' } },
      { subject: toolRequestSubject('inst', 'lookup'), trace: { traceparent: tp, tracestate: 'v=1' } },
      { subject: doorbellSubject('untraced'), trace: undefined },
      { subject: doorbellSubject('forged'), trace: undefined },
    ]);
  });
});

/** A header no W3C parser accepts: a publisher is untrusted. */
function forged() {
  const h = headers();
  h.set('traceparent', '00-zzzz-not-a-trace');
  return h;
}

describe('publishes are lossy by contract', () => {
  it('a closed connection: doorbells and agent events are dropped and counted, never thrown; busProblem says so', async () => {
    const c = await connectBus(nats.url, 'closing');
    expect(busProblem(c)).toBeNull();
    await c.close();
    expect(busProblem(c)).toBe('NATS connection closed for good');
    expect(ringDoorbell(c, 'i', 'coder', 'enqueue')).toBe(false);
    const drops: string[] = [];
    const events = natsAgentEvents(c, (kind) => drops.push(kind));
    const base = { actor_id: crypto.randomUUID(), turn_id: crypto.randomUUID(), turn_epoch: 1, at_ms: 1 };
    events.step({ ...base, phase: 'started', claim_id: 'c', role: 'r' });
    events.chunk({ ...base, seq: 0, text: 'x' });
    // An invalid event is dropped too (validated before it leaves).
    events.task({ ...base, status: 'bogus' as 'success', claim_id: 'c', role: 'r', deliverable_id: null });
    expect(drops).toEqual(['step', 'chunk', 'task']);
    expect(ringDoorbell(nc, 'i', 'coder', 'enqueue')).toBe(true);
  });
});
