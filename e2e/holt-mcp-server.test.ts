import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artefact } from '../src/blackboard/types.ts';
import { type LlmServer, startLlmServer, text } from '../test/harness/llm.ts';
import { eventually } from '../test/harness/wait.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * `holt mcp` driven as an IDE drives it: the SDK's own client starts `holt mcp` in the workspace (no
 * --name: it finds the workspace's instance as every command does) and speaks MCP over its standard
 * input and output. Against a real `holt up`: a command agent that asks a question and finishes on the
 * answer, and a living LLM agent (scripted model) that takes messages.
 */

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const FIX = join(ROOT, 'test', 'fixtures', 'agents');
const NAME = 'mcpsrv';
const CALLER = '00-7e3b1c0a9d2f4e6b8a1c3e5f7a9b0c2d-1a2b3c4d5e6f7a8b-01';

let scratch: string;
let ws: string;
let env: Record<string, string>;
let llm: LlmServer;
let client: Client;
let transport: StdioClientTransport;
let stderr = '';

async function holt(args: string[]): Promise<string> {
  try {
    return (await run(HOLT, args, { cwd: ws, env, maxBuffer: 20 * 1024 * 1024 })).stdout;
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    throw new Error(`holt ${args.join(' ')} failed (${x.code}): ${x.stderr}${x.stdout}`);
  }
}

/** A resource's text (a binary one has none). */
const textOf = (c: { text: string } | { blob: string } | undefined): string =>
  c && 'text' in c ? c.text : '';

/** A tool call's result: its text, parsed as JSON when it is, and whether it is an error. */
async function call(
  name: string,
  args: Record<string, unknown> = {},
  onprogress?: (p: Progress) => void,
  meta?: Record<string, string>,
): Promise<{ isError: boolean; text: string; json: () => Record<string, unknown> }> {
  const r = (await client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) }, undefined, {
    onprogress,
    timeout: 120_000,
  })) as CallToolResult;
  const t = r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  return { isError: r.isError === true, text: t, json: () => JSON.parse(t) as Record<string, unknown> };
}

beforeAll(async () => {
  llm = await startLlmServer([text('noted'), text('noted'), text('noted')]);
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'mcpsrv-'));
  ws = join(scratch, 'ws');
  mkdirSync(ws);
  // The Asker bids only once the gate file exists: the test opens it when the client has heard of the
  // goal, so the question cannot come before the wait has seen the workflow run.
  writeFileSync(
    join(scratch, 'gate.mjs'),
    `import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
const [gate, script, ...args] = process.argv.slice(2);
while (!existsSync(gate)) await new Promise((r) => setTimeout(r, 50));
process.exit(spawnSync('node', [script, ...args], { stdio: 'inherit' }).status ?? 1);
`,
  );
  writeFileSync(
    join(ws, 'holt.yml'),
    `version: "2"
orchestrator:
  bid_timeout: 120s
llm:
  api_key_env: OPENAI_API_KEY
agents:
  Asker:
    command: ["node", "${join(FIX, 'asker.mjs')}"]
    bid_script: ["node", "${join(scratch, 'gate.mjs')}", "${join(scratch, 'open')}", "${join(FIX, 'bid-types.mjs')}", "GoalDefined", "exclusive"]
  Watcher:
    bidding_strategy: ignore
    prompts:
      execution: You watch the builds.
    llm:
      life: true
      max_steps: 2
`,
  );
  commitWorkspace(ws);
  env = {
    ...(process.env as Record<string, string>),
    HOLT_HOME: join(scratch, 'home'),
    NO_COLOR: '1',
    HOLT_LLM_BASE_URL: llm.url,
    HOLT_LLM_MODEL: 'scripted',
    OPENAI_API_KEY: 'sk-mcp-server-e2e',
  };
  // As an IDE does: the server starts with the editor, before anyone ran `holt up`.
  transport = new StdioClientTransport({ command: HOLT, args: ['mcp'], cwd: ws, env, stderr: 'pipe' });
  transport.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  client = new Client({ name: 'holt-e2e', version: '1.0.0' });
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close().catch(() => undefined);
  if (env) await holt(['down', '--name', NAME]).catch(() => undefined);
  await llm?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('holt mcp driven by the SDK client over stdio (real holt up, real stores)', () => {
  let goal = '';
  let terminal: Artefact;

  it('before holt up: the tools are listed and each says to start the instance, without exiting', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'answer_question',
      'list_artefacts',
      'list_questions',
      'read_artefact',
      'send_message',
      'start_goal',
      'status',
      'wait_for_workflow',
    ]);
    const st = await call('status');
    expect(st.isError).toBe(true);
    expect(st.text).toContain('no Holt instances found for this workspace: run `holt up` first');
    await holt(['up', '--name', NAME, '--timeout', '180']);
    const up = await call('status');
    expect(up.isError).toBe(false);
    expect(up.json()).toMatchObject({ name: NAME, status: 'running' });
    // The admin URLs' passwords never reach the client.
    expect(up.text).not.toMatch(/redis:\/\/[^@\s"]*:[^@\s"*]+@/);
  }, 180_000);

  it('start_goal → wait_for_workflow stops at the question, with progress → answer_question → completed', async () => {
    // A client that traces hands its context in _meta: the workflow continues that trace.
    const started = await call('start_goal', { goal: 'paint the shed' }, undefined, { traceparent: CALLER });
    expect(started.isError).toBe(false);
    goal = started.json().goal_id as string;
    expect(goal).toMatch(/^[0-9a-f-]{36}$/);

    const progress: Progress[] = [];
    const asked = await call('wait_for_workflow', { goal, timeout_seconds: 90 }, (p) => {
      progress.push(p);
      writeFileSync(join(scratch, 'open'), '');
    });
    const w1 = asked.json() as { state: string; questions: Artefact[]; artefacts: { id: string }[] };
    expect(w1.state).toBe('question');
    expect(w1.questions[0]!.payload).toBe('Which colour for: paint the shed?');
    // While it waited (the goal alone: the Asker bids once the first notification came), a notification
    // per new artefact, counting them; none with the result, which lists them all.
    expect(progress[0]).toMatchObject({
      progress: 1,
      message: '1 artefacts; the latest GoalDefined by user',
    });
    for (const [i, p] of progress.entries())
      if (i) expect(p.progress).toBeGreaterThan(progress[i - 1]!.progress);
    expect(progress.at(-1)!.progress).toBeLessThan(w1.artefacts.length);

    const open = (await call('list_questions')).json() as { questions: { id: string }[] };
    expect(open.questions.map((q) => q.id)).toEqual([w1.questions[0]!.id]);
    const answered = await call('answer_question', {
      question_id: w1.questions[0]!.id.slice(0, 8),
      text: 'green',
    });
    expect(answered.json()).toMatchObject({ question_id: w1.questions[0]!.id });

    const done = (await call('wait_for_workflow', { goal: goal.slice(0, 8), timeout_seconds: 90 })).json();
    expect(done).toMatchObject({ goal, state: 'completed' });
    terminal = done.terminal as Artefact;
    expect(terminal).toMatchObject({ payload: 'answer was: green', produced_by_role: 'Asker' });
    expect(terminal.traceparent?.split('-')[1]).toBe(CALLER.split('-')[1]);
    expect(((await call('list_questions')).json() as { questions: unknown[] }).questions).toEqual([]);
  }, 180_000);

  it('list_artefacts filters by workflow, type and limit; read_artefact and the resources show them', async () => {
    const all = (await call('list_artefacts', { goal })).json() as {
      total: number;
      artefacts: { id: string; structural_type: string }[];
    };
    expect(all.artefacts.map((a) => a.structural_type)).toEqual([
      'Standard',
      'Question',
      'Answer',
      'Terminal',
    ]);
    expect(all.artefacts[0]!.id).toBe(goal);
    const one = (await call('list_artefacts', { type: 'Ans*', limit: 1 })).json() as {
      artefacts: { structural_type: string }[];
    };
    expect(one.artefacts.map((a) => a.structural_type)).toEqual(['Answer']);
    expect(((await call('list_artefacts', { agent: 'Asker' })).json().total as number) >= 2).toBe(true);

    const read = await call('read_artefact', { id: terminal.id });
    expect(JSON.parse(read.text)).toEqual(terminal);
    const res = await client.readResource({ uri: `holt://artefact/${terminal.id}` });
    expect(res.contents[0]).toMatchObject({ mimeType: 'application/json' });
    expect(JSON.parse(textOf(res.contents[0]))).toEqual(terminal);

    const graph = await client.readResource({ uri: `holt://workflow/${goal}/graph` });
    const mermaid = textOf(graph.contents[0]);
    expect(mermaid.startsWith('flowchart LR\n')).toBe(true);
    // A node per artefact of the workflow (the Terminal drawn round), an edge per source.
    for (const a of all.artefacts) expect(mermaid).toContain(a.id.slice(0, 8));
    expect(mermaid).toContain(`(["Done<br/>Asker · ${terminal.id.slice(0, 8)}"])`);
    expect(mermaid.match(/ --> /g)?.length).toBe(3);
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate).sort()).toEqual([
      'holt://artefact/{id}',
      'holt://workflow/{goal}/graph',
    ]);
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).toContain(`holt://workflow/${goal}/graph`);
    expect(resources.map((r) => r.uri)).toContain(`holt://artefact/${terminal.id}`);
  }, 180_000);

  it('send_message reaches a living agent as the operator; an agent that does not live is refused', async () => {
    const sent = await call('send_message', { agent: 'Watcher', text: 'Stand down for today.' });
    expect(sent.isError).toBe(false);
    expect(sent.json()).toMatchObject({ status: 'queued' });
    // The turn it starts shows the model the message, labelled as the operator's instruction.
    const user = await eventually(
      'a model request with the message',
      () =>
        llm.requests
          .map((r) => r.body.messages.find((m) => m.role === 'user')?.content ?? '')
          .find((u) => u.includes('Stand down for today.')),
      { timeoutMs: 60_000 },
    );
    expect(user).toContain('Stand down for today.');
    expect(user).toContain('authority="operator_instruction"');
    const nobody = await call('send_message', { agent: 'Nobody', text: 'hello' });
    expect(nobody.isError).toBe(true);
    expect(nobody.text).toMatch(/the ingress answered 40\d/);
  }, 180_000);

  it('bad input is a tool error that says what is wrong, and the server goes on serving', async () => {
    const unknown = await call('read_artefact', { id: 'zzzzzzzz' });
    expect(unknown).toMatchObject({ isError: true, text: 'no artefacts found matching "zzzzzzzz"' });
    const short = await call('read_artefact', { id: 'abc' });
    expect(short.isError).toBe(true);
    expect(short.text).toContain('a prefix of at least 6 characters');
    const missing = await call('read_artefact', {});
    expect(missing.isError).toBe(true);
    expect(missing.text).toMatch(/Invalid arguments for tool read_artefact.*id/s);
    const notQuestion = await call('answer_question', { question_id: goal, text: 'yes' });
    expect(notQuestion).toMatchObject({ isError: true, text: `${goal} is not a Question artefact` });
    const tooLong = await call('wait_for_workflow', { goal, timeout_seconds: 100_000 });
    expect(tooLong.isError).toBe(true);
    expect(tooLong.text).toContain('timeout_seconds');
    const empty = await call('start_goal', { goal: '   ' });
    expect(empty).toMatchObject({ isError: true });
    expect(empty.text).toContain('the goal must not be empty');
    expect((await call('no_such_tool')).text).toContain('Tool no_such_tool not found');
    await expect(client.readResource({ uri: 'holt://artefact/zzzzzzzz' })).rejects.toThrow(
      /no artefacts found matching "zzzzzzzz"/,
    );
    expect((await call('status')).isError).toBe(false);
  }, 180_000);

  it('start_goal refuses a dirty workspace unless allow_dirty, as holt forage does', async () => {
    writeFileSync(join(ws, 'scratch.txt'), 'not committed\n');
    const dirty = await call('start_goal', { goal: 'paint the fence' });
    expect(dirty.isError).toBe(true);
    expect(dirty.text).toContain(
      'Git workspace is not clean: commit or stash these first, or pass allow_dirty: true',
    );
    expect(dirty.text).toContain('scratch.txt');
    const forced = await call('start_goal', { goal: 'paint the fence', allow_dirty: true });
    expect(forced.isError).toBe(false);
    // Nothing but the protocol went to standard output (a stray line would have broken the client),
    // and the server said what it serves on standard error.
    expect(stderr).toContain('holt mcp: serving the local Holt instance of this workspace');
  }, 180_000);
});
