import { execFileSync } from 'node:child_process';
import { context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import { createGoal } from '../cli/board.ts';
import { silentLogger } from '../common/logger.ts';
import { claimFor, newGoal, register, startOrchestrator } from '../orchestrator/testkit.ts';
import { CommandExecutor } from '../pup/command-executor.ts';
import { PupMetrics } from '../pup/metrics.ts';
import { artefact, config, grantedClaim } from '../pup/testkit.ts';
import { parseCarrier } from './carrier.ts';
import { tracingSettings } from './settings.ts';
import { startTracing, type Tracing } from './tracing.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = `00-${TRACE}-00f067aa0ba902b7-01`;
const spans = new InMemorySpanExporter();
let tracing: Tracing;
let redis: RedisServer;
let bb: Blackboard;
let ws: string;
beforeAll(async () => {
  tracing = startTracing('test', tracingSettings({}), silentLogger(), {
    processors: [new SimpleSpanProcessor({ exporter: spans })],
  });
  redis = await startRedis();
  bb = Blackboard.connect(redis.url, 'trace');
  ws = makeTempDir('trace-ws');
  execFileSync('git', ['init', '-q', ws]);
});
afterAll(async () => {
  await tracing?.shutdown();
  await bb?.close();
  await redis?.stop();
  removeDir(ws);
});
beforeEach(() => spans.reset());

describe('trace context on the blackboard (extension fields Holt ignores)', () => {
  it('an artefact written inside a span carries it, in its hash and its event; one given keeps its own', async () => {
    const events: string[] = [];
    const sub = bb.redis.duplicate();
    await sub.subscribe(bb.k.channels.artefactEvents);
    sub.on('message', (_c, m) => events.push(m));
    const span = tracing.tracer.startSpan('writer');
    const a = artefact();
    await context.with(trace.setSpan(context.active(), span), () => bb.createArtefact(a));
    span.end();
    const tp = `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;
    expect((await bb.getArtefact(a.id))?.traceparent).toBe(tp);
    expect(await bb.redis.hget(bb.k.artefact(a.id), 'traceparent')).toBe(tp);
    const given = artefact({ traceparent: PARENT, tracestate: 'v=1' });
    await bb.createArtefact(given);
    expect(await bb.getArtefact(given.id)).toMatchObject({ traceparent: PARENT, tracestate: 'v=1' });
    await expect.poll(() => events.length).toBe(2);
    expect(JSON.parse(events[0]!)).toMatchObject({ id: a.id, traceparent: tp });
    await sub.quit();
  });

  it('outside any span an artefact carries none; a malformed one in a hash is dropped on read, the artefact kept', async () => {
    const a = artefact();
    await bb.createArtefact(a);
    expect(await bb.redis.hget(bb.k.artefact(a.id), 'traceparent')).toBeNull();
    await bb.redis.hset(bb.k.artefact(a.id), 'traceparent', '00-not-a-trace');
    const read = await bb.getArtefact(a.id);
    expect(read?.id).toBe(a.id);
    expect(read?.traceparent).toBeUndefined();
  });

  it("a goal continues the caller's trace, else the active span's, else starts its own", async () => {
    const given = await createGoal(bb, 'given', undefined, { traceparent: PARENT });
    expect((await bb.getArtefact(given))?.traceparent).toBe(PARENT);
    const fresh = await Promise.all([createGoal(bb, 'one'), createGoal(bb, 'two')]);
    const tps = await Promise.all(fresh.map(async (id) => (await bb.getArtefact(id))?.traceparent));
    for (const t of tps) expect(parseCarrier({ traceparent: t })).toBeDefined();
    expect(tps[0]).not.toBe(tps[1]);
    const span = tracing.tracer.startSpan('ingress');
    const inSpan = await context.with(trace.setSpan(context.active(), span), () => createGoal(bb, 'inside'));
    span.end();
    expect((await bb.getArtefact(inSpan))?.traceparent).toBe(
      `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`,
    );
  });

  it("the orchestrator's claim continues the trace of the artefact it claims", async () => {
    const o = startOrchestrator(redis.url, 'trace-orch');
    const board = Blackboard.connect(redis.url, 'trace-orch');
    try {
      await register(board, ['coder']);
      const goal = newGoal('traced', { traceparent: PARENT });
      await board.createArtefact(goal);
      const c = await claimFor(board, goal.id);
      expect(c.traceparent).toBe(PARENT);
      expect(await board.redis.hget(board.k.claim(c.id), 'traceparent')).toBe(PARENT);
    } finally {
      await o.stop();
      await board.close();
    }
  });

  it("a command agent's invocation is a child of the claim's trace; its tool and its output carry that span", async () => {
    const cfg = config({
      REDIS_URL: redis.url,
      HOLT_INSTANCE_NAME: 'trace',
      HOLT_WORKSPACE: ws,
      HOLT_AGENT_COMMAND: JSON.stringify([
        process.execPath,
        '-e',
        'process.stdin.resume().on("end",()=>process.stdout.write(JSON.stringify({artefact_type:"Seen",artefact_payload:String(process.env.TRACEPARENT),summary:"seen"})))',
      ]),
    });
    const metrics = new PupMetrics({ instance: 'trace', role: cfg.role, mode: cfg.mode });
    const ex = new CommandExecutor({ bb, cfg, log: silentLogger(), metrics, owner: 'me' });
    const { claim } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: cfg.role,
      traceparent: PARENT,
    });
    expect(await ex.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('success');
    const [invoke] = spans.getFinishedSpans().filter((s) => s.name === `invoke_agent ${cfg.role}`);
    expect(invoke?.spanContext().traceId).toBe(TRACE);
    expect(invoke?.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(invoke?.attributes).toMatchObject({ 'holt.claim.id': claim.id, 'holt.outcome': 'success' });
    const out = await bb.getArtefact(outputId('trace', claim.id, cfg.role, 'exclusive'));
    const mine = `00-${TRACE}-${invoke?.spanContext().spanId}-01`;
    expect(out).toMatchObject({ payload: mine, traceparent: mine });
  });
});
