import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Jaeger, parentSpanId, startJaeger, tagValue } from '../test/harness/jaeger.ts';
import { type LlmServer, startLlmServer } from '../test/harness/llm.ts';
import { eventually } from '../test/harness/wait.ts';
import { DEMO_LLM_PLAN, DEMO_LLM_SCRIPT } from './demo-llm-script.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * The LLM demo (examples/demo-llm) run as its README says — `holt up` with the endpoint from the
 * environment — against the scripted OpenAI-compatible server: Writer (one tool call, then its Draft),
 * Reviewer (approves), Finisher (Terminal). The agents run strictly one after the other (review phase,
 * then exclusive), so one script in order serves them all.
 */

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const NAME = 'demo-llm';
const KEY = 'sk-demo-llm-e2e-7c1d';
/** The trace the goal continues (`holt forage --traceparent`); the spans go to a real Jaeger. */
const TRACE = '6e1f0c2b3a4d5e6f7a8b9c0d1e2f3a4b';
const CALLER = 'feedc0dedeadbeef';

let scratch: string;
let ws: string;
let env: NodeJS.ProcessEnv;
let llm: LlmServer;
let jaeger: Jaeger;

async function holt(args: string[], ok = true) {
  try {
    const r = await run(HOLT, args, { cwd: ws, env, maxBuffer: 20 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    if (ok) throw new Error(`holt ${args.join(' ')} failed (${x.code}): ${x.stderr}`);
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

const PLAN = DEMO_LLM_PLAN;

beforeAll(async () => {
  [llm, jaeger] = await Promise.all([startLlmServer(DEMO_LLM_SCRIPT), startJaeger()]);
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'demo-llm-'));
  ws = join(scratch, 'ws');
  cpSync(join(ROOT, 'examples', 'demo-llm'), ws, { recursive: true });
  commitWorkspace(ws);
  env = {
    ...process.env,
    HOLT_HOME: join(scratch, 'home'),
    NO_COLOR: '1',
    HOLT_LLM_BASE_URL: llm.url,
    HOLT_LLM_MODEL: 'scripted',
    OPENAI_API_KEY: KEY,
    OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpUrl,
    OTEL_BSP_SCHEDULE_DELAY: '200',
  };
});

afterAll(async () => {
  if (env) await holt(['down', '--name', NAME], false);
  await llm?.close();
  await jaeger?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the LLM demo end to end (real binary, scripted model)', () => {
  it('up → forage --watch reaches the Terminal; holt status shows each LLM agent’s budget use', async () => {
    const up = await holt(['up', '--name', NAME]);
    expect(up.stdout).toContain(`Instance '${NAME}' started successfully (3 agents ready)`);

    const w = await holt([
      'forage',
      '--name',
      NAME,
      '--goal',
      'Plan a CHANGELOG',
      '--traceparent',
      `00-${TRACE}-${CALLER}-01`,
      '--watch',
      '-o',
      'jsonl',
      '--timeout',
      '90',
    ]);
    const events = w.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string });
    expect(events.at(-1)?.event).toBe('workflow_completed');

    const hoard = await holt(['hoard', '--name', NAME, '-o', 'jsonl']);
    const trail = hoard.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; structural_type: string; payload: string });
    expect(trail.map((a) => a.type)).toEqual(['GoalDefined', 'Draft', 'Review', 'WorkflowComplete']);
    expect(trail[1]?.payload).toBe(PLAN);
    expect(trail.at(-1)?.structural_type).toBe('Terminal');

    // The model saw the Writer's tool result (the workspace listing), and the key as a bearer token.
    expect(llm.requests).toHaveLength(4);
    const toolResult = llm.requests[1]!.body.messages.find((m) => m.role === 'tool')?.content ?? '';
    expect(toolResult).toContain('holt.yml');
    expect(llm.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);

    // Budget use per LLM agent, as `holt status` prints it (the seed: "visible in holt status").
    const st = JSON.parse((await holt(['status', '--name', NAME, '--json'])).stdout) as {
      llm_agents: Record<string, { state: string; calls_in_window: number; calls_limit: number }>;
    };
    expect(st.llm_agents.Writer).toMatchObject({ state: 'active', calls_in_window: 2, calls_limit: 40 });
    expect(st.llm_agents.Reviewer).toMatchObject({ calls_in_window: 1, calls_limit: 20 });
    expect(st.llm_agents.Finisher).toMatchObject({ calls_in_window: 1, calls_limit: 10 });

    // The same calls in the Writer pup's own metrics (what Prometheus scrapes): tokens, latency.
    const writer = (
      JSON.parse((await holt(['status', '--name', NAME, '--json'])).stdout) as {
        components: { name: string; healthPort?: number }[];
      }
    ).components.find((c) => c.name === 'Writer');
    const metrics = await (await fetch(`http://127.0.0.1:${writer?.healthPort}/metrics`)).text();
    expect(metrics).toMatch(
      /holt_llm_tokens_total\{direction="input",holt_instance="demo-llm",role="Writer"[^}]*\} [1-9]/,
    );
    expect(metrics).toMatch(/holt_llm_request_duration_seconds_count\{[^}]*outcome="success"[^}]*\} 2\n/);
    const text = (await holt(['status', '--name', NAME])).stdout;
    expect(text).toMatch(/LLM AGENT\s+STATE\s+CALLS\s+TOKENS\s+COST/);
    expect(text).toMatch(/Writer\s+active\s+2\/40\s+\d+\/200000/);
    expect(text).toMatch(/Finisher\s+active\s+1\/10/);
    expect(text + hoard.stdout + w.stdout).not.toContain(KEY);

    const down = await holt(['down', '--name', NAME]);
    expect(down.stdout).toContain(`Instance '${NAME}' removed successfully`);

    // The same workflow as a trace on a real Jaeger (each pup flushed its spans as it stopped): each
    // model call a `chat {model}` span with the GenAI attributes, the Writer's tool call an
    // `execute_tool` span, both under their agent's invocation; the model server got the chat span as
    // its traceparent; and the key is in no span.
    const trace = await eventually('the model calls in the trace', async () => {
      const t = await jaeger.trace(TRACE);
      return t && t.spans.filter((x) => x.operationName === 'chat scripted').length === 4 ? t : undefined;
    });
    const chats = trace.spans.filter((x) => x.operationName === 'chat scripted');
    const byId = new Map(trace.spans.map((x) => [x.spanID, x]));
    for (const chat of chats) {
      expect(tagValue(chat, 'gen_ai.request.model')).toBe('scripted');
      expect(tagValue(chat, 'gen_ai.operation.name')).toBe('chat');
      expect(Number(tagValue(chat, 'gen_ai.usage.input_tokens'))).toBeGreaterThan(0);
      expect(tagValue(chat, 'gen_ai.response.finish_reasons')).toBeDefined();
      expect(byId.get(parentSpanId(chat) ?? '')?.operationName).toMatch(
        /^invoke_agent (Writer|Reviewer|Finisher)$/,
      );
    }
    const sent = llm.requests.map((q) => String(q.headers.traceparent));
    expect(sent.map((h) => h.split('-')[2]).sort()).toEqual(chats.map((x) => x.spanID).sort());
    // Every tool call under its agent's invocation; the Writer's listing under the Writer's.
    const tools = trace.spans.filter((x) => x.operationName.startsWith('execute_tool '));
    for (const t of tools) {
      expect(tagValue(t, 'gen_ai.tool.name')).toBe(t.operationName.slice('execute_tool '.length));
      expect(byId.get(parentSpanId(t) ?? '')?.operationName).toMatch(
        /^invoke_agent (Writer|Reviewer|Finisher)$/,
      );
    }
    const listing = tools.filter((t) => t.operationName === 'execute_tool list_files');
    expect(listing).toHaveLength(1);
    expect(byId.get(parentSpanId(listing[0]!) ?? '')?.operationName).toBe('invoke_agent Writer');
    const everything = JSON.stringify(trace.spans.map((x) => [x.tags, x.logs, x.process.tags]));
    expect(everything).not.toContain(KEY);
  });
});
