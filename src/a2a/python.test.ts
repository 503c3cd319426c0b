import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type A2AEvent, a2aClient } from '../../test/harness/a2a-python.ts';
import { call, text } from '../../test/harness/llm.ts';
import {
  llmPupEnv,
  startLifeIngress,
  startPupRuntime,
  useRuntimeStores,
} from '../../test/harness/llm-runtime.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import type { IngressServer } from '../ingress/server.ts';
import { createToken, tokenSource } from '../ingress/tokens.ts';

// A living agent served over A2A, driven by the official A2A Python SDK's client (a2a-sdk from PyPI,
// written by others) through the real ingress: the card, message/send and /stream, tasks/get, a task in
// input-required answered, tasks/cancel and tasks/resubscribe, over A2A v1.0 and v0.3; the agent's pup
// is real, its model scripted.

const stores = useRuntimeStores('a2a-ws');
const instance = 'a2a1';
let dir: string;
let ingress: IngressServer;
let base: string;
let operator: string;
let other: string;

beforeAll(async () => {
  dir = makeTempDir('a2a');
  const file = join(dir, 'tokens.json');
  operator = createToken(file, {
    name: 'ops',
    role: 'coder',
    modes: ['enqueue_message'],
    origin: 'operator',
  }).token;
  other = createToken(file, {
    name: 'hook',
    role: 'coder',
    modes: ['enqueue_message'],
    origin: 'webhook',
  }).token;
  ingress = await startLifeIngress(
    stores,
    instance,
    tokenSource(file, () => undefined),
    {
      description: 'Writes and reports on builds.',
      skills: [
        {
          id: 'build-report',
          name: 'Build reports',
          description: 'Reports on a build.',
          tags: ['ci'],
          examples: [],
        },
      ],
    },
  );
  base = `http://127.0.0.1:${ingress.port}/a2a/coder`;
  await startPupRuntime(
    stores,
    llmPupEnv(stores, instance, { HOLT_LLM_LIFE: 'true', HOLT_LIFE_POLL_MS: '200' }),
  );
}, 300_000);
afterAll(async () => {
  await ingress?.close();
  removeDir(dir);
});

const py = (step: string, args: string[] = [], token = operator, version: '1.0' | '0.3' = '1.0') =>
  a2aClient(base, token, step, args, version);
const states = (events: A2AEvent[] | undefined) =>
  (events ?? []).map((e) => `${e.kind}:${e.state ?? e.text}`);
const lastUserText = () =>
  stores.llm.requests.at(-1)?.body.messages.find((m) => m.role === 'user')?.content ?? '';

describe('A2A server for living agents (the Python SDK as client)', () => {
  it("serves the agent's card from its Agent: skills, streaming, bearer tokens, v1.0 and v0.3", async () => {
    const card = await py('card');
    expect(card).toMatchObject({
      name: 'coder',
      description: 'Writes and reports on builds.',
      streaming: true,
      push: false,
      schemes: { bearer: 'bearer' },
      skills: [['build-report', 'Build reports']],
    });
    expect(card.interfaces).toEqual([
      ['JSONRPC', '1.0', base],
      ['JSONRPC', '0.3', base],
    ]);
    // Without a token, nothing: not even the card.
    const none = await py('card', [], '');
    expect(none.error).toBeDefined();
    expect(none.message).toContain('401');
  }, 300_000);

  it("message/send queues a message labelled a2a with its token's authority; the task completes with the answer; tasks/get reads it; another token cannot", async () => {
    stores.llm.reset([text('It is 42.')]);
    const sent = await py('send', ['what is it?']);
    expect(sent.events).toHaveLength(1);
    const task = sent.events![0]!;
    expect(task).toMatchObject({
      kind: 'task',
      state: 'TASK_STATE_COMPLETED',
      artifacts: [{ name: 'answer', text: 'It is 42.' }],
    });
    expect(lastUserText()).toContain('what is it?');
    const labels = await stores.pool.query<{ labels: Record<string, string> }>(
      `SELECT labels FROM holt.agent_messages WHERE instance = $1 AND body = 'what is it?'`,
      [instance],
    );
    expect(labels.rows[0]?.labels).toMatchObject({
      origin: 'a2a',
      authority: 'operator_instruction',
      admission: 'token ops',
    });
    const got = await py('get', [task.id!, '1']);
    expect(got).toMatchObject({ id: task.id, state: 'TASK_STATE_COMPLETED', history: ['what is it?'] });
    expect(await py('get', [task.id!], other)).toMatchObject({ error: 'TaskNotFoundError' });
    // A completed task cannot be cancelled, nor resubscribed to.
    expect(await py('cancel', [task.id!])).toMatchObject({ error: 'TaskNotCancelableError' });
    expect(await py('resubscribe', [task.id!])).toMatchObject({ error: 'UnsupportedOperationError' });
  }, 300_000);

  it("message/stream streams a work item's progress and its completion report as the artifact", async () => {
    stores.llm.reset([
      call('work_create', { objective: 'report on build 7' }),
      { toolCalls: [{ name: 'work_complete', arguments: {} }], text: 'Build 7 is green: 212/212.' },
      text('reported'),
    ]);
    const s = await py('stream', ['Build 7 started; report on it.']);
    const ev = s.events ?? [];
    expect(ev[0]).toMatchObject({ kind: 'task' });
    expect(ev.at(-2)).toMatchObject({ kind: 'artifact', name: 'report', text: 'Build 7 is green: 212/212.' });
    expect(ev.at(-1)).toMatchObject({ kind: 'status', state: 'TASK_STATE_COMPLETED' });
    expect(
      states(ev)
        .filter((x) => x.startsWith('status:'))
        .at(0),
    ).toMatch(/WORKING|COMPLETED/);
  }, 300_000);

  it('a task waiting for an operator is input-required; the answer in the same task resumes it to completion', async () => {
    stores.llm.reset([call('wait', { for: 'operator', on: 'which colour' }), text('Painted it blue.')]);
    const s = await py('stream', ['Paint the shed.']);
    const end = s.events!.at(-1)!;
    expect(end).toMatchObject({
      kind: 'status',
      state: 'TASK_STATE_INPUT_REQUIRED',
      text: 'Waiting for which colour.',
    });
    const id = s.events![0]!.id!;
    const ctx = (await py('get', [id])).context as string;
    const answered = await py('send', ['Blue.', id, ctx]);
    expect(answered.events![0]).toMatchObject({
      kind: 'task',
      id,
      state: 'TASK_STATE_COMPLETED',
      artifacts: [{ text: 'Painted it blue.' }],
      history: ['Paint the shed.', 'Blue.'],
    });
  }, 300_000);

  it('tasks/cancel ends a working task at once, ends its wait and tells the agent; tasks/resubscribe follows a task sent without waiting', async () => {
    stores.llm.reset([
      call('wait', { for: 'message', seconds: 3600, on: 'more data' }),
      text('Dropped it.'),
      call('wait', { for: 'message', seconds: 3600, on: 'the go' }),
      text('three'),
    ]);
    const sent = await py('send', ['Crunch the numbers.', '--now']);
    const id = sent.events![0]!.id!;
    await stores.llm.waitForRequests(1, 90_000);
    await eventually(
      'the agent works on it',
      async () => (await py('get', [id])).state === 'TASK_STATE_WORKING',
      {
        timeoutMs: 90_000,
      },
    );
    const cancelled = await py('cancel', [id]);
    expect(cancelled).toMatchObject({ id, state: 'TASK_STATE_CANCELED' });
    expect(cancelled.status_text).toContain('cancelled by A2A caller (token ops)');
    await stores.llm.waitForRequests(2, 90_000);
    expect(lastUserText()).toContain(`The A2A task ${id} was cancelled by its caller`);
    expect(await py('get', [id])).toMatchObject({ state: 'TASK_STATE_CANCELED' });
    expect(await py('cancel', [id])).toMatchObject({ error: 'TaskNotCancelableError' });

    const dropped = await py('drop', ['Count to three.']);
    expect(dropped).toMatchObject({ kind: 'task' });
    // Resubscribed while it waits (its stream is the ingress's one request in flight), then woken.
    const following = py('resubscribe', [dropped.id as string]);
    await eventually('the resubscription is open', async () => ingress.inFlight() === 1, {
      timeoutMs: 90_000,
    });
    const go = await fetch(`http://127.0.0.1:${ingress.port}/v1/agents/coder/messages`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${operator}`,
        'idempotency-key': 'go-1',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ text: 'Go.' }),
    });
    expect(go.status).toBe(202);
    const r = await following;
    expect(r.events![0]).toMatchObject({ kind: 'task', id: dropped.id });
    expect(r.events!.at(-2)).toMatchObject({ kind: 'artifact', text: 'three' });
    expect(r.events!.at(-1)).toMatchObject({ kind: 'status', state: 'TASK_STATE_COMPLETED' });
  }, 300_000);

  it("an A2A v0.3 client (the SDK's compat transport) sends, gets and is refused the same way", async () => {
    stores.llm.reset([text('v0.3 is fine.')]);
    const sent = await py('send', ['old protocol?'], operator, '0.3');
    expect(sent.events![0]).toMatchObject({
      state: 'TASK_STATE_COMPLETED',
      artifacts: [{ text: 'v0.3 is fine.' }],
    });
    expect(await py('get', [sent.events![0]!.id!], operator, '0.3')).toMatchObject({
      state: 'TASK_STATE_COMPLETED',
    });
    expect(await py('get', [sent.events![0]!.id!], other, '0.3')).toMatchObject({
      error: expect.any(String),
    });
  }, 300_000);
});
