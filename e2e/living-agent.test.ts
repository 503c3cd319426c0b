import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolRequest } from '../src/bus/tools.ts';
import { call, type LlmServer, startLlmServer, text } from '../test/harness/llm.ts';
import { eventually } from '../test/harness/wait.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * A living agent under `holt up`, driven as its users drive it (issue 17's "done when"): an outside
 * `curl` with a capability token queues a message; the agent makes a work item and sleeps on a timer;
 * its pup is killed mid-wait and restarted by the supervisor; the timer wakes it; it asks a tool that a
 * tool service answers over NATS (with its one tool's user, nothing more); it completes the item
 * with a report; the labels say where each thing came from; `holt send` instructs it as the operator.
 */

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const NAME = 'living';
const KEY = 'sk-living-e2e-4f0a';

const HOLT_FILE = `version: "2"
llm:
  api_key_env: OPENAI_API_KEY
agents:
  Watcher:
    bidding_strategy: ignore
    prompts:
      execution: You watch the team's builds and report on them.
    llm:
      life: true
      max_steps: 6
      tools:
        - name: lookup
          description: Look a build up (the build service answers).
          parameters: {type: object, properties: {build: {type: string}}, required: [build]}
          async: nats
          async_timeout: 60s
`;

let scratch: string;
let ws: string;
let env: NodeJS.ProcessEnv;
let llm: LlmServer;
let service: NatsConnection | undefined;

async function holt(args: string[]) {
  try {
    return (await run(HOLT, args, { cwd: ws, env, maxBuffer: 20 * 1024 * 1024 })).stdout;
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    throw new Error(`holt ${args.join(' ')} failed (${x.code}): ${x.stderr}${x.stdout}`);
  }
}

type Status = {
  ingressUrl?: string;
  components: { name: string; pid?: number; restarts: number; status: string }[];
  llm_agents: Record<string, { life_state: string; items_completed: number }>;
};
const status = async () => JSON.parse(await holt(['status', '--name', NAME, '--json'])) as Status;

/** The outside world's client: curl, with the token in a header and an idempotency key. */
async function curl(
  url: string,
  token: string,
  key: string,
  body: string,
): Promise<{ code: number; body: string }> {
  const r = await run('curl', [
    '-sS',
    '-o',
    '-',
    '-w',
    '\n%{http_code}',
    '-X',
    'POST',
    '-H',
    `Authorization: Bearer ${token}`,
    '-H',
    `Idempotency-Key: ${key}`,
    '-H',
    'Content-Type: application/json',
    '--data',
    body,
    url,
  ]);
  const lines = r.stdout.trimEnd().split('\n');
  return { code: Number(lines.pop()), body: lines.join('\n') };
}

const userText = (i: number) => llm.requests[i]!.body.messages.find((m) => m.role === 'user')?.content ?? '';
const toolText = (i: number) =>
  llm.requests[i]!.body.messages.filter((m) => m.role === 'tool').at(-1)?.content ?? '';

beforeAll(async () => {
  llm = await startLlmServer([
    call('work_create', { objective: 'Report on build 7 once it settles' }),
    // Long enough for the test to see it waiting (a CLI call can take seconds on a busy machine).
    call('wait', { for: 'timer', seconds: 12, on: 'build 7 to settle' }),
    call('lookup', { build: '7' }),
    {
      toolCalls: [{ name: 'work_complete', arguments: {} }],
      text: 'Build 7 is green: all 212 tests passed.',
    },
    text('reported'),
    call('wait', { for: 'operator', on: 'a go-ahead for tomorrow' }),
    text('standing down'),
  ]);
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'living-'));
  ws = join(scratch, 'ws');
  mkdirSync(ws);
  writeFileSync(join(ws, 'holt.yml'), HOLT_FILE);
  commitWorkspace(ws);
  env = {
    ...process.env,
    HOLT_HOME: join(scratch, 'home'),
    NO_COLOR: '1',
    HOLT_LLM_BASE_URL: llm.url,
    HOLT_LLM_MODEL: 'scripted',
    OPENAI_API_KEY: KEY,
  };
});

afterAll(async () => {
  await service?.close().catch(() => undefined);
  if (env) await holt(['down', '--name', NAME]).catch(() => undefined);
  await llm?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('a living agent under holt up (real binary, real stores, scripted model)', () => {
  it('curl → work item → timer (its pup killed mid-wait) → NATS tool → completed with a report; labels at every step', async () => {
    const up = await holt(['up', '--name', NAME]);
    expect(up).toContain(`Instance '${NAME}' started successfully`);
    const { ingressUrl } = await status();
    expect(ingressUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const token = (await holt(['token', 'create', 'Watcher', 'ci', '--name', NAME])).trim();
    expect(token).toMatch(/^holt_/);
    await expect(holt(['token', 'create', 'Nobody', '--name', NAME])).rejects.toThrow(/has no agent Nobody/);
    expect(await holt(['token', 'list', '--name', NAME])).toMatch(
      /ci\s+Watcher\s+enqueue_message,wake_hint\s+webhook\s+60/,
    );

    // The build service: a tool service with its one tool's credentials (it can only hear that tool's
    // requests and answer them).
    const toolUrl = new URL((await holt(['tool-url', '--name', NAME, '--tool', 'lookup'])).trim());
    expect(toolUrl.username).toBe('tool-lookup');
    service = await connect({
      servers: `${toolUrl.hostname}:${toolUrl.port}`,
      user: decodeURIComponent(toolUrl.username),
      pass: decodeURIComponent(toolUrl.password),
    });
    const asked: ToolRequest[] = [];
    service.subscribe(`cmd.tool.${NAME}.lookup`, {
      callback: (_e, m) => {
        const req = ToolRequest.parse(m.json());
        asked.push(req);
        m.respond(
          JSON.stringify({
            turn_id: req.turn_id,
            tool_call_id: req.tool_call_id,
            output: 'build 7: green, 212/212 tests',
          }),
        );
      },
    });
    await service.flush();

    const url = `${ingressUrl}/v1/agents/Watcher/messages`;
    expect((await curl(url, 'holt_wrong', 'k0', '{"text":"x"}')).code).toBe(401);
    const sent = await curl(
      url,
      token,
      'ci-run-7',
      JSON.stringify({ text: 'Build 7 started; tell us how it ends.' }),
    );
    expect(sent.code).toBe(202);
    expect(
      (await curl(url, token, 'ci-run-7', JSON.stringify({ text: 'Build 7 started; tell us how it ends.' })))
        .code,
    ).toBe(200);

    // Turn 1: the item, then the timer. Once the item waits, the agent's pup is killed (no grace).
    await llm.waitForRequests(2, 60_000);
    const waiting = await eventually(
      'the item waits on its timer',
      async () => {
        const items = JSON.parse(await holt(['work', 'list', 'Watcher', '--name', NAME, '--json'])) as {
          id: string;
          blockedBy: { wait?: string }[];
        }[];
        return items[0]?.blockedBy.some((b) => b.wait === 'timer') ? items[0] : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const before = (await status()).components.find((c) => c.name === 'Watcher')!;
    process.kill(before.pid!, 'SIGKILL');
    await eventually(
      'the Watcher restarted',
      async () => {
        const c = (await status()).components.find((x) => x.name === 'Watcher');
        return c && c.restarts >= 1 && c.status === 'running' && c.pid !== before.pid ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );

    // The timer still fires; the tool is asked over NATS and answers; the item completes with its report.
    await llm.waitForRequests(5, 90_000);
    expect(userText(0)).toContain(
      '<message origin="webhook" surface="POST /v1/agents/Watcher/messages" admission="token ci" authority="external_evidence"',
    );
    expect(userText(0)).toContain('Build 7 started');
    expect(userText(2)).toContain('origin="timer"');
    expect(userText(2)).toMatch(/Your timer [0-9a-f-]{36}( \(work item [0-9a-f-]{36}\))? fired/);
    expect(userText(2)).toMatch(/authority="agent_note">\nbuild 7 to settle\n<\/message>/);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ instance: NAME, role: 'Watcher', tool: 'lookup', args: { build: '7' } });
    expect(toolText(3)).toContain(
      `origin="task" surface="cmd.tool.${NAME}.lookup" admission="tool service" authority="external_evidence"`,
    );
    expect(toolText(3)).toContain('build 7: green');
    const shown = await eventually(
      'the item completed',
      async () => {
        const out = await holt(['work', 'show', waiting.id.slice(0, 8), '--name', NAME]);
        return out.includes('completed') ? out : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(shown).toContain('report:     Build 7 is green: all 212 tests passed.');
    expect(shown).toContain('webhook via POST /v1/agents/Watcher/messages (token ci; external evidence)');
    const stored = (await holt(['hoard', '--messages', '--name', NAME, '-o', 'jsonl']))
      .trim()
      .split('\n')
      .map(
        (l) => JSON.parse(l) as { role: string; kind: string; body: string; labels: Record<string, string> },
      );
    expect(stored).toEqual([
      expect.objectContaining({
        role: 'Watcher',
        kind: 'message',
        body: 'Build 7 started; tell us how it ends.',
        labels: {
          origin: 'webhook',
          surface: 'POST /v1/agents/Watcher/messages',
          admission: 'token ci',
          authority: 'external_evidence',
        },
      }),
    ]);

    // The operator instructs it through the same ingress (holt send holds its own operator token).
    expect(await holt(['send', 'Watcher', 'Stand down for today.', '--name', NAME])).toMatch(
      /^queued: message \d+ for Watcher/,
    );
    await llm.waitForRequests(6, 60_000);
    expect(userText(5)).toContain('origin="operator"');
    expect(userText(5)).toContain('authority="operator_instruction"');
    expect(userText(5)).toContain('Stand down for today.');

    // It waits for an operator; the operator lists its tasks and cancels that wait (through the
    // ingress's task API, with the CLI's operator token): the next turn is told.
    const tasks = await eventually(
      'the operator wait is a task',
      async () => {
        const out = await holt(['life', 'tasks', 'Watcher', '--name', NAME]);
        return out.includes('a go-ahead for tomorrow') ? out : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(tasks).toMatch(
      /^ID\s+KIND\s+STATE\s+DEADLINE\s+AGE\s+WHAT\n[0-9a-f]{8}\s+operator\s+waiting\s+none\s+/,
    );
    const taskId = tasks.split('\n')[1]!.slice(0, 8);
    expect(await holt(['life', 'cancel', 'Watcher', taskId, '--name', NAME])).toBe(
      `cancelled operator task ${taskId} (a go-ahead for tomorrow): Watcher's next turn gets a cancellation report\n`,
    );
    await llm.waitForRequests(7, 60_000);
    expect(userText(6)).toContain('Cancellation report: an operator cancelled your wait for an operator');
    expect(await holt(['life', 'tasks', 'Watcher', '--name', NAME])).toBe('Watcher has no open tasks.\n');
    await expect(holt(['life', 'cancel', 'Watcher', taskId, '--name', NAME])).rejects.toThrow(
      /the ingress answered 404: agent Watcher has no open task/,
    );

    // What came in, with its labels, and what the scheduler decided; the status counts the item.
    const life = await holt(['life', 'show', 'Watcher', '--name', NAME]);
    expect(life).toContain('webhook via POST /v1/agents/Watcher/messages (token ci; external evidence)');
    expect(life).toContain(
      'operator via POST /v1/agents/Watcher/messages (token cli-operator; operator instruction)',
    );
    expect(life).toMatch(/start: 1 message\(s\) or wake\(s\) came in/);
    expect(life).toMatch(/start: 1 wait\(s\) ended/);
    expect(life).toMatch(
      /cancel: operator token cli-operator cancelled operator task [0-9a-f-]{36} \(a go-ahead/,
    );
    const st = await eventually(
      'the life status',
      async () => {
        const s = await status();
        return s.llm_agents.Watcher?.items_completed === 1 ? s : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(st.llm_agents.Watcher?.life_state).toBe('running');
    expect(await holt(['status', '--name', NAME])).toMatch(/Watcher\s+running\s+0\s+0\s+0\s+1\s+\d+s ago/);
    // A stopped agent's ingress refuses, and queues nothing.
    await holt(['life', 'stop', 'Watcher', '--name', NAME]);
    expect((await curl(url, token, 'after-stop', '{"text":"x"}')).code).toBe(409);
    // Nothing of the key or the token reaches the instance's logs.
    const logs = await holt(['logs', 'Watcher', '--name', NAME, '--lines', '2000']);
    const orch = await holt(['logs', 'orchestrator', '--name', NAME, '--lines', '2000']);
    for (const secret of [KEY, token]) expect(logs + orch).not.toContain(secret);
    expect(orch).toContain('ingress_request');
  });
});
