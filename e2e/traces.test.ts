import { execFile } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Jaeger,
  type JaegerSpan,
  type JaegerTrace,
  parentSpanId,
  startJaeger,
  tagValue,
} from '../test/harness/jaeger.ts';
import { traceSvg } from '../test/harness/trace-picture.ts';
import { eventually } from '../test/harness/wait.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * The demo through `holt up`'s real processes, exporting to a real Jaeger: one workflow with a rejected
 * review and a rework, its last agent (the Finisher) a scalable one whose claim runs in a worker through
 * the Postgres inbox. The trace read back from Jaeger's query API holds all of it, each span under a
 * parent in the same trace (or the caller's), from the `holt forage --traceparent` the test hands in.
 * The trace is then drawn (test/harness/trace-picture.ts) into the scratch dir, or with
 * HOLT_UPDATE_PICTURES=1 into docs/img/demo-trace.svg, the README's picture (so CI never changes the tree).
 */
const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const NAME = 'traced';
const TRACE = '8f3a5d5e0c6b4f6aa1f2e3d4c5b6a798';
const CALLER = 'c0ffee00c0ffee00';

let scratch: string;
let ws: string;
let jaeger: Jaeger;
let env: NodeJS.ProcessEnv;

const holt = (args: string[]) => run(HOLT, args, { cwd: ws, env, maxBuffer: 20 << 20 });

beforeAll(async () => {
  jaeger = await startJaeger();
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'traces-'));
  ws = join(scratch, 'ws');
  cpSync(join(ROOT, 'examples', 'demo'), ws, { recursive: true });
  const file = join(ws, 'holt.yml');
  const yml = readFileSync(file, 'utf8');
  // The Finisher is the last agent of the file: it becomes scalable (a controller that bids, a worker
  // that runs its claims from the inbox). A slow bid on a busy machine must not change the workflow.
  if (!yml.trimEnd().endsWith('"CodeCommit", "exclusive"]'))
    throw new Error('examples/demo/holt.yml changed');
  writeFileSync(file, yml.replace('bid_timeout: 10s', 'bid_timeout: 120s'));
  appendFileSync(file, '    worker: {command: ["node", "agents/finisher.mjs"], max_concurrent: 1}\n');
  commitWorkspace(ws);
  env = {
    ...process.env,
    HOLT_HOME: join(scratch, 'home'),
    NO_COLOR: '1',
    // holt up hands OTEL_* to its components (never to a tool).
    OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpUrl,
    OTEL_BSP_SCHEDULE_DELAY: '200',
  };
});

afterAll(async () => {
  await holt(['down', '--name', NAME]).catch(() => undefined);
  await jaeger?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const named = (t: JaegerTrace, name: string) => t.spans.filter((s) => s.operationName === name);
const events = (s: JaegerSpan) =>
  s.logs.flatMap((l) => l.fields.filter((f) => f.key === 'event').map((f) => String(f.value)));

describe('the demo traced on Jaeger through holt up', () => {
  it('one trace: a rejected review and its rework, every agent, a worker through the inbox; each span under its parent', async () => {
    await holt(['up', '--name', NAME, '--timeout', '120']);
    const w = await holt([
      'forage',
      '--name',
      NAME,
      '--goal',
      'a traced haiku',
      '--traceparent',
      `00-${TRACE}-${CALLER}-01`,
      '--watch',
      '--timeout',
      '150',
    ]);
    expect(w.stdout).toContain('Terminal');
    // Each component flushes its spans as it stops.
    await holt(['down', '--name', NAME]);

    const trace = await eventually(
      'the workflow span and the worker in the trace',
      async () => {
        const t = await jaeger.trace(TRACE);
        return t && named(t, 'workflow').length && t.spans.some((s) => s.operationName.startsWith('process '))
          ? t
          : undefined;
      },
      { timeoutMs: 60_000 },
    );

    // The workflow: under the caller, completed, the rejection and the rework on it.
    const [workflow] = named(trace, 'workflow');
    expect(parentSpanId(workflow!)).toBe(CALLER);
    expect(tagValue(workflow!, 'holt.workflow.outcome')).toBe('completed');
    expect(tagValue(workflow!, 'holt.workflow.reworks')).toBe(1);
    expect(events(workflow!)).toEqual(expect.arrayContaining(['review_rejected', 'rework']));

    // Every agent worked in this trace: the Drafter twice (its draft and the rework), the Reviewer twice.
    const invocations = (role: string) => named(trace, `invoke_agent ${role}`);
    expect(invocations('Drafter')).toHaveLength(2);
    expect(invocations('Reviewer')).toHaveLength(2);
    for (const role of ['Linter', 'Publisher', 'Finisher']) expect(invocations(role), role).toHaveLength(1);

    // The Finisher's claim ran in a worker: an inbox attempt, the invocation under it.
    const [attempt] = trace.spans.filter((s) => s.operationName.startsWith('process '));
    expect(tagValue(attempt!, 'messaging.system')).toBe('holt_inbox');
    expect(tagValue(attempt!, 'holt.inbox.outcome')).toBe('done');
    expect(parentSpanId(invocations('Finisher')[0]!)).toBe(attempt!.spanID);

    // Bids and the orchestrator's steps are in it too, from their own processes.
    expect(trace.spans.filter((s) => s.operationName.startsWith('bid ')).length).toBeGreaterThanOrEqual(5);
    expect(named(trace, 'orchestrator step').length).toBeGreaterThan(0);
    expect(new Set(trace.spans.map((s) => s.process.serviceName))).toEqual(
      new Set(['holt-orchestrator', 'holt-pup']),
    );

    // Each agent's grant is an event of the step that made it.
    const granted = named(trace, 'orchestrator step').flatMap((s) =>
      s.logs
        .filter((l) => l.fields.some((f) => f.key === 'event' && f.value === 'grant'))
        .map((l) => String(l.fields.find((f) => f.key === 'gen_ai.agent.name')?.value)),
    );
    expect(new Set(granted)).toEqual(new Set(['Drafter', 'Reviewer', 'Linter', 'Publisher', 'Finisher']));
    // A rejected review and its rework are the loop working: no span of this workflow is an error.
    expect(
      trace.spans.filter((s) => tagValue(s, 'otel.status_code') === 'ERROR').map((s) => s.operationName),
    ).toEqual([]);

    // No orphan: every span's parent is in the trace, or is the caller's own span.
    const ids = new Set(trace.spans.map((s) => s.spanID));
    const orphans = trace.spans.filter((s) => {
      const p = parentSpanId(s);
      return p !== undefined && p !== CALLER && !ids.has(p);
    });
    expect(orphans.map((s) => `${s.operationName} → ${parentSpanId(s)}`)).toEqual([]);
    expect(trace.spans.filter((s) => parentSpanId(s) === undefined).map((s) => s.operationName)).toEqual([]);

    // The README's picture of this trace, redrawn only when asked.
    const out =
      process.env.HOLT_UPDATE_PICTURES === '1' ? join(ROOT, 'docs', 'img') : join(scratch, 'pictures');
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'demo-trace.svg'), traceSvg(trace));
  });
});
