import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Jaeger, parentSpanId, startJaeger, tagValue } from '../../test/harness/jaeger.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { silentLogger } from '../common/logger.ts';
import type { Orchestrator } from '../orchestrator/orchestrator.ts';
import { newGoal, register, startOrchestrator } from '../orchestrator/testkit.ts';
import { node, spawnPup } from '../pup/testkit.ts';
import { tracingSettings } from './settings.ts';
import { startTracing, type Tracing } from './tracing.ts';

/**
 * Traces on a real backend: two pup processes export to Jaeger over OTLP/HTTP, and the trace is read
 * back through Jaeger's query API. The goal continues a caller's trace; the second agent's work is a
 * child of the first's, across processes, through the artefact and the claim on the blackboard.
 */
const TRACE = '5b8efff798038103d269b633813fc60c';
const CALLER_SPAN = 'eee19b7ec3c1b174';
const INSTANCE = 'traced';
let jaeger: Jaeger;
let redis: RedisServer;
let bb: Blackboard;
let orch: Orchestrator;
let ws: string;
let tracing: Tracing;
const children: ChildProcess[] = [];
const local = new InMemorySpanExporter();

beforeAll(async () => {
  [jaeger, redis] = await Promise.all([startJaeger(), startRedis()]);
  bb = Blackboard.connect(redis.url, INSTANCE);
  ws = makeTempDir('jaeger-ws');
  execFileSync('git', ['init', '-q', ws]);
  // This process is the orchestrator: it exports to the same Jaeger.
  tracing = startTracing(
    'orchestrator',
    tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpUrl }),
    silentLogger(),
    // Beside the export: the test waits here for the spans it must not stop before.
    { processors: [new SimpleSpanProcessor({ exporter: local })] },
  );
  orch = startOrchestrator(redis.url, INSTANCE, {}, { traceWorkflows: true });
  await register(bb, ['drafter', 'finisher']);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await orch?.stop();
  await bb?.close();
  await Promise.all([redis?.stop(), jaeger?.stop()]);
  if (ws) removeDir(ws);
});

const finish = `process.stdin.resume().on("end",()=>process.stdout.write(JSON.stringify({structural_type:"Terminal",artefact_type:"Done",artefact_payload:String(process.env.TRACEPARENT),summary:"done"})))`;

describe('traces on Jaeger (OTLP/HTTP protobuf, read back through its query API)', () => {
  it('one trace from the caller through two agents in two processes, each span under the right parent', async () => {
    const common = {
      REDIS_URL: redis.url,
      HOLT_INSTANCE_NAME: INSTANCE,
      HOLT_WORKSPACE: ws,
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpUrl,
    };
    const pups = [
      spawnPup(
        {
          ...common,
          HOLT_AGENT_NAME: 'drafter',
          HOLT_AGENT_BID_SCRIPT: JSON.stringify(node('bid-types.mjs', 'Goal', 'exclusive')),
        },
        children,
      ),
      spawnPup(
        {
          ...common,
          HOLT_AGENT_NAME: 'finisher',
          HOLT_AGENT_COMMAND: JSON.stringify([process.execPath, '-e', finish]),
          HOLT_AGENT_BID_SCRIPT: JSON.stringify(node('bid-types.mjs', 'EchoResult', 'exclusive')),
        },
        children,
      ),
    ];
    const goal = newGoal('trace me', { type: 'Goal', traceparent: `00-${TRACE}-${CALLER_SPAN}-01` });
    await bb.createArtefact(goal);
    const done = await eventually('the Terminal', findTerminal, { timeoutMs: 60_000 });
    // The workflow's span is written once the leader has heard of the Terminal: waited for, then flushed.
    await eventually('the workflow span', () => local.getFinishedSpans().some((s) => s.name === 'workflow'));
    // SIGTERM: each pup flushes its spans as it stops; the orchestrator's are flushed here.
    for (const p of pups) p.child.kill('SIGTERM');
    await Promise.all(pups.map((p) => p.exited));
    await orch.stop();
    await tracing.shutdown();

    const trace = await eventually('both agents in the trace', async () => {
      const t = await jaeger.trace(TRACE);
      return t && t.spans.filter((s) => s.operationName.startsWith('invoke_agent')).length >= 2
        ? t
        : undefined;
    });
    const span = (name: string) => {
      const found = trace.spans.filter((s) => s.operationName === name);
      expect(found, name).toHaveLength(1);
      return found[0]!;
    };
    const drafter = span('invoke_agent drafter');
    const finisher = span('invoke_agent finisher');
    expect(parentSpanId(drafter)).toBe(CALLER_SPAN);
    expect(parentSpanId(finisher)).toBe(drafter.spanID);
    expect(drafter.process.serviceName).toBe('holt-pup');
    expect(drafter.process.tags).toContainEqual(
      expect.objectContaining({ key: 'holt.role', value: 'drafter' }),
    );
    expect(tagValue(finisher, 'gen_ai.agent.name')).toBe('finisher');
    expect(tagValue(finisher, 'holt.outcome')).toBe('success');
    // The finisher's tool got its invocation's span; the Terminal carries it too.
    expect(done.payload).toBe(`00-${TRACE}-${finisher.spanID}-01`);
    expect(done.traceparent).toBe(done.payload);

    // The workflow, from the goal to its Terminal, under the caller's span (the orchestrator writes it
    // at the end, with the goal's time as its start).
    const workflow = span('workflow');
    expect(parentSpanId(workflow)).toBe(CALLER_SPAN);
    expect(workflow.process.serviceName).toBe('holt-orchestrator');
    expect(tagValue(workflow, 'holt.workflow.outcome')).toBe('completed');
    expect(tagValue(workflow, 'holt.goal.id')).toBe(goal.id);
    expect(tagValue(workflow, 'holt.workflow.end.id')).toBe(done.id);
    expect(workflow.startTime).toBe(goal.created_at_ms * 1000);

    // Each agent's bid, in the trace of the claim it bid on: the drafter took the goal, the finisher
    // the draft (whose artefact the drafter's invocation wrote).
    const bid = (role: string, type: string) =>
      trace.spans.filter((s) => s.operationName === `bid ${role}` && tagValue(s, 'holt.bid.type') === type);
    const [drafterBid] = bid('drafter', 'exclusive');
    const [finisherBid] = bid('finisher', 'exclusive');
    expect(parentSpanId(drafterBid!)).toBe(CALLER_SPAN);
    expect(parentSpanId(finisherBid!)).toBe(drafter.spanID);
    expect(tagValue(finisherBid!, 'holt.bid.source')).toBe('script');
    expect(bid('finisher', 'ignore').map(parentSpanId)).toContain(CALLER_SPAN);

    // The orchestrator's steps: the goal's claim under the caller's span, granted to the drafter; the
    // draft's claim under the drafter's span, granted to the finisher.
    const steps = trace.spans.filter((s) => s.operationName === 'orchestrator step');
    const granted = (role: string) =>
      steps.find((s) =>
        s.logs.some((l) => l.fields.some((f) => f.key === 'gen_ai.agent.name' && f.value === role)),
      );
    expect(granted('drafter')?.process.serviceName).toBe('holt-orchestrator');
    expect(parentSpanId(granted('drafter')!)).toBe(CALLER_SPAN);
    expect(parentSpanId(granted('finisher')!)).toBe(drafter.spanID);
  });
});

async function findTerminal() {
  for (const id of await bb.redis.zrange(bb.k.artefactIndex, 0, -1)) {
    const a = await bb.getArtefact(id);
    if (a?.structural_type === 'Terminal') return a;
  }
  return undefined;
}
