import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { call, text } from '../../test/harness/llm.ts';
import {
  llmPupEnv,
  sendLifeMessage,
  startLifeIngress,
  startPupRuntime,
  useRuntimeStores,
} from '../../test/harness/llm-runtime.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import type { IngressServer } from '../ingress/server.ts';
import { createToken, tokenSource } from '../ingress/tokens.ts';
import { LifeStore } from '../life/store.ts';

// A living agent's tasks (life/tasks.ts) listed and cancelled through the real ingress (GET/DELETE
// /v1/agents/{role}/tasks) with an operator token: each kind (a timer, a message wait, an operator
// wait, a NATS call, a background command), on real Redis, Postgres and NATS with the scripted model.

const stores = useRuntimeStores('life-tasks-ws');
const services: { unsubscribe(): void }[] = [];
afterEach(() => {
  for (const s of services.splice(0)) s.unsubscribe();
});
let n = 0;
let dir: string;
let file: string;
let ingress: IngressServer | undefined;
let base: string;
let ops: string;
let hook: string;
let instance = '';

beforeAll(() => {
  dir = makeTempDir('life-tasks');
  file = join(dir, 'tokens.json');
  ops = createToken(file, {
    name: 'ops',
    role: 'coder',
    modes: ['enqueue_message'],
    origin: 'operator',
  }).token;
  hook = createToken(file, {
    name: 'ci',
    role: 'coder',
    modes: ['enqueue_message'],
    origin: 'webhook',
  }).token;
});
afterEach(async () => {
  await ingress?.close();
  ingress = undefined;
});
afterAll(() => removeDir(dir));

/** A new instance for the test, and its ingress (the orchestrator's, as it serves it). */
async function newInstance(): Promise<void> {
  instance = `tasks${++n}`;
  ingress = await startLifeIngress(
    stores,
    instance,
    tokenSource(file, () => undefined),
  );
  base = `http://127.0.0.1:${ingress.port}/v1/agents/coder/tasks`;
}

type TaskJson = { id: string; kind: string; what: string; state: string; deadline: string | null };
const api = async (method: 'GET' | 'DELETE', path = '', token = ops) => {
  const r = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
  return {
    status: r.status,
    body: (await r.json()) as { tasks?: TaskJson[]; task?: TaskJson; error?: string },
  };
};
const openTasks = async () => (await api('GET')).body.tasks ?? [];

const tools = (extra: object[] = []) =>
  JSON.stringify([
    { name: 'lookup', description: 'look a fact up', async: 'nats', asyncTimeoutSeconds: 600 },
    ...extra,
  ]);
async function pup(env: Record<string, string> = {}) {
  return startPupRuntime(
    stores,
    llmPupEnv(stores, instance, {
      HOLT_LLM_LIFE: 'true',
      HOLT_LIFE_POLL_MS: '5000', // slow on purpose: a cancel must not need the poll
      HOLT_LLM_TOOLS: tools(),
      ...env,
    }),
  );
}
const userText = (i: number) =>
  stores.llm.requests[i]!.body.messages.find((m) => m.role === 'user')?.content ?? '';
const lastToolText = (i: number) =>
  stores.llm.requests[i]!.body.messages.filter((m) => m.role === 'tool').at(-1)?.content ?? '';

describe("a living agent's tasks", () => {
  it('lists and cancels waits of each kind; each next turn gets a cancellation report; only operator tokens may', async () => {
    await newInstance();
    stores.llm.reset([
      call('wait', { for: 'timer', seconds: 3600, on: 'the nightly window' }),
      call('wait', { for: 'message', seconds: 3600, on: 'the reviewer' }),
      call('wait', { for: 'operator', on: 'a go-ahead' }),
      text('nothing left to wait for'),
    ]);
    await pup();
    await sendLifeMessage(stores, instance, 'start waiting');
    for (const [i, kind, what] of [
      [1, 'timer', 'the nightly window'],
      [2, 'message', 'the reviewer'],
      [3, 'operator', 'a go-ahead'],
    ] as const) {
      await eventually(`the ${kind} wait is a task`, async () => (await openTasks()).length === 1);
      const [task] = await openTasks();
      expect(task).toMatchObject({ kind, what, state: 'waiting' });
      expect(task?.deadline === null).toBe(kind === 'operator');
      // A webhook's token may not see or cancel them; a bad id is refused before any store is read.
      expect((await api('GET', '', hook)).status).toBe(403);
      expect((await api('DELETE', `/${task!.id}`, hook)).status).toBe(403);
      expect((await api('DELETE', '/not-hex!')).status).toBe(400);
      expect((await api('DELETE', '/abc')).status).toBe(400);
      expect((await api('GET', `/${task!.id.slice(0, 8)}`)).body.task?.id).toBe(task!.id);
      const del = await api('DELETE', `/${task!.id.slice(0, 8)}`);
      expect(del).toMatchObject({ status: 202, body: { task: { id: task!.id, state: 'cancelling' } } });
      expect((await api('DELETE', `/${task!.id}`)).status).toBe(404); // already cancelled
      await stores.llm.waitForRequests(i + 1);
      expect(userText(i)).toContain(`Cancellation report: an operator cancelled your`);
      expect(userText(i)).toContain(task!.id);
    }
    const states = await stores.pool.query<{ kind: string; state: string; cancelled_by: string }>(
      'SELECT kind, state, cancelled_by FROM holt.agent_waits WHERE instance = $1 ORDER BY created_at',
      [instance],
    );
    expect(states.rows).toEqual(
      ['timer', 'message', 'operator'].map((kind) => ({
        kind,
        state: 'cancelled',
        cancelled_by: 'operator token ops',
      })),
    );
    const audit = await new LifeStore(stores.pool).audit(instance, 'coder', 50);
    expect(audit.filter((a) => a.decision === 'cancel')).toHaveLength(3);
    expect(await openTasks()).toEqual([]);
  });

  it('cancels a NATS call nobody answers: the suspended turn resumes with a cancellation report', async () => {
    await newInstance();
    const asked: string[] = [];
    services.push(
      stores.nc.subscribe(`cmd.tool.${instance}.lookup`, {
        callback: (_e, m) => {
          asked.push(m.string());
        },
      }),
    );
    stores.llm.reset([call('lookup', { q: 'never answered' }), text('went on without it')]);
    await pup();
    await sendLifeMessage(stores, instance, 'look it up');
    await eventually('the call is a task', async () => (await openTasks()).length === 1);
    const [task] = await openTasks();
    expect(task).toMatchObject({ kind: 'nats', what: 'lookup', state: 'waiting' });
    expect(asked).toHaveLength(1);
    expect((await api('DELETE', `/${task!.id}`)).status).toBe(202);
    await stores.llm.waitForRequests(2);
    expect(lastToolText(1)).toContain(
      'Cancellation report: your call of lookup was cancelled by operator token ops',
    );
    expect(lastToolText(1)).toContain('origin="system"');
    const rows = await stores.pool.query(
      'SELECT wait_status FROM holt.turn_waiting_tools WHERE instance = $1',
      [instance],
    );
    expect(rows.rows.map((r) => r.wait_status)).toEqual(['applied']);
  });

  it('cancels a background command: its whole process group is killed, and the turn hears of it', async () => {
    await newInstance();
    const pids = join(stores.ws, `${instance}.pids`);
    // The command starts a grandchild; both write their pids, then sleep far past the test.
    const script = `const fs = require('fs'), cp = require('child_process');
      const g = cp.spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore' });
      fs.writeFileSync(${JSON.stringify(pids)}, process.pid + ' ' + g.pid);
      setTimeout(() => console.log('built'), 600000);`;
    const build = {
      name: 'build',
      description: 'a long build',
      async: 'command',
      asyncTimeoutSeconds: 600,
      argv: [process.execPath, '-e', script],
    };
    stores.llm.reset([call('build'), text('the build was cancelled')]);
    await pup({ HOLT_LLM_TOOLS: tools([build]) });
    await sendLifeMessage(stores, instance, 'build it');
    await eventually(
      'the build runs',
      async () => existsSync(pids) && readFileSync(pids, 'utf8').includes(' '),
    );
    const running = readFileSync(pids, 'utf8').split(' ').map(Number);
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(running.map(alive)).toEqual([true, true]);
    const [task] = await openTasks();
    expect(task).toMatchObject({ kind: 'command', what: 'build' });
    expect((await api('DELETE', `/${task!.id}`)).status).toBe(202);
    await eventually('the command and its grandchild are gone', async () => !running.some(alive));
    await stores.llm.waitForRequests(2);
    expect(lastToolText(1)).toContain('Cancellation report: your call of build was cancelled');
    expect(lastToolText(1)).not.toContain('built');
  });
});
