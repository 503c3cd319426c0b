import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
import { lifeWakeSubject } from '../bus/subjects.ts';
import type { IngressServer } from '../ingress/server.ts';
import { createToken, tokenSource } from '../ingress/tokens.ts';
import { LifeTasks } from '../life/tasks.ts';

// Two Holts talking A2A on real servers: the living agent of Holt "alpha" has an asynchronous tool
// `ask_beta` (async: a2a) whose remote is the agent of Holt "beta", served over A2A by beta's ingress.
// alpha's turn suspends on the call, beta's agent answers, alpha's turn resumes with the answer; a
// cancelled call cancels beta's task. beta's token is alpha's pup's alone: no model, step or tool sees it.

const stores = useRuntimeStores('two-holts-ws');
let dir: string;
let beta: IngressServer;
let betaToken: string;

const requestText = (i: number) => JSON.stringify(stores.llm.requests[i]?.body.messages ?? []);

beforeAll(async () => {
  dir = makeTempDir('two-holts');
  const file = join(dir, 'beta-tokens.json');
  betaToken = createToken(file, {
    name: 'alpha',
    role: 'coder',
    modes: ['enqueue_message'],
    origin: 'webhook',
  }).token;
  beta = await startLifeIngress(
    stores,
    'beta',
    tokenSource(file, () => undefined),
    {
      description: 'Knows the builds.',
      skills: [],
    },
  );
  const life = { HOLT_LLM_LIFE: 'true', HOLT_LIFE_POLL_MS: '200' };
  await startPupRuntime(stores, llmPupEnv(stores, 'beta', life));
  const tools = [
    {
      name: 'ask_beta',
      description: "Asks Holt beta's agent.",
      async: 'a2a',
      asyncTimeoutSeconds: 120,
      a2a: { url: `http://127.0.0.1:${beta.port}/a2a/coder`, token: { env: 'BETA_A2A_TOKEN' } },
    },
  ];
  await startPupRuntime(
    stores,
    llmPupEnv(stores, 'alpha', { ...life, HOLT_LLM_TOOLS: JSON.stringify(tools) }),
    undefined,
    { BETA_A2A_TOKEN: betaToken },
  );
}, 300_000);
afterAll(async () => {
  await beta?.close();
  removeDir(dir);
});

describe('two Holts over A2A', () => {
  it("alpha's agent calls beta's agent as an asynchronous tool: suspended, answered, resumed", async () => {
    stores.llm.reset([
      call('ask_beta', { message: 'What is the status of build 7?' }),
      text('Build 7 is green: 212/212.'),
      text('Beta says build 7 is green.'),
    ]);
    await sendLifeMessage(stores, 'alpha', 'Find out how build 7 did.');
    await stores.llm.waitForRequests(3, 90_000);
    // beta's agent got the question as an A2A message of alpha's token (evidence, not instruction).
    expect(requestText(1)).toContain('What is the status of build 7?');
    const labels = await stores.pool.query<{ labels: Record<string, string> }>(
      `SELECT labels FROM holt.agent_messages WHERE instance = 'beta' AND body LIKE 'What is the status%'`,
    );
    expect(labels.rows[0]?.labels).toMatchObject({
      origin: 'a2a',
      admission: 'token alpha',
      authority: 'external_evidence',
    });
    // alpha's resumed turn has the answer as the call's result, labelled as the remote agent's.
    const tool = (stores.llm.requests[2]?.body.messages ?? []).filter((m) => m.role === 'tool').at(-1);
    expect(tool?.content).toContain('Build 7 is green: 212/212.');
    expect(tool?.content).toContain(`A2A http://127.0.0.1:${beta.port}/a2a/coder`);
    await eventually(
      "alpha's turn ends with the answer",
      async () => {
        const done = await stores.pool.query<{ payload: string }>(
          `SELECT result->>'payload' AS payload FROM holt.agent_turns WHERE instance = 'alpha' AND status = 'done'`,
        );
        return done.rows.some((r) => r.payload === 'Beta says build 7 is green.');
      },
      { timeoutMs: 90_000 },
    );
    // The token is in no request to the model and no recorded step of either Holt.
    expect(JSON.stringify(stores.llm.requests)).not.toContain(betaToken);
    const steps = await stores.pool.query(
      'SELECT count(*)::int AS n FROM holt.agent_steps WHERE row_to_json(agent_steps)::text LIKE $1',
      [`%${betaToken}%`],
    );
    expect(steps.rows[0]?.n).toBe(0);
  }, 300_000);

  it("cancelling alpha's call cancels beta's task; alpha's turn gets a cancellation report", async () => {
    stores.llm.reset([
      call('ask_beta', { message: 'Watch build 8 and tell me when it ends.' }),
      call('wait', { for: 'message', seconds: 3600, on: 'build 8 to end' }),
      text('Going on without it.'),
      text('Dropped build 8.'),
    ]);
    await sendLifeMessage(stores, 'alpha', 'Keep an eye on build 8.');
    await stores.llm.waitForRequests(2, 90_000);
    const betaTask = async () =>
      (
        await stores.pool.query<{ id: string; cancelled_by: string | null }>(
          `SELECT id, cancelled_by FROM holt.a2a_tasks WHERE instance = 'beta' ORDER BY created_at DESC LIMIT 1`,
        )
      ).rows[0];
    const tasks = new LifeTasks(stores.pool);
    await eventually(
      'the call is a task of alpha',
      async () => (await tasks.list('alpha', 'coder')).some((t) => t.kind === 'a2a' && t.state === 'waiting'),
      { timeoutMs: 90_000 },
    );
    const [c] = (await tasks.list('alpha', 'coder')).filter((t) => t.kind === 'a2a');
    expect(c?.what).toBe('ask_beta');
    const r = await tasks.cancel('alpha', 'coder', c!.id, 'operator test');
    expect(r.kind).toBe('cancelled');
    stores.nc.publish(lifeWakeSubject('alpha', 'coder'));
    await eventually(
      "beta's task is cancelled by alpha's pup",
      async () => !!(await betaTask())?.cancelled_by,
      { timeoutMs: 90_000 },
    );
    expect((await betaTask())?.cancelled_by).toBe('A2A caller (token alpha)');
    await stores.llm.waitForRequests(4, 90_000);
    const all = stores.llm.requests.map((q) => JSON.stringify(q.body.messages)).join('\n');
    expect(all).toContain('Cancellation report: your call of ask_beta');
    expect(all).toContain('was cancelled by its caller');
  }, 300_000);
});
