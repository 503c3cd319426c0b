import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { call, text } from '../../test/harness/llm.ts';
import { llmPupEnv, startPupRuntime, useRuntimeStores } from '../../test/harness/llm-runtime.ts';
import { eventually } from '../../test/harness/wait.ts';
import { lifeWakeSubject } from '../bus/subjects.ts';
import { labelsOf } from '../life/labels.ts';
import { LifeStore } from '../life/store.ts';
import { WorkStore } from '../work/store.ts';

// A work item handed, unfinished, from one living agent to another (work_handoff), end to end on real
// stores: the item moves with its todos, the other agent is woken by a message wrapped as another
// agent's signal (never an instruction), and both audit trails record it.

const stores = useRuntimeStores('handoff-ws');

const pup = (instance: string, role: string) =>
  startPupRuntime(
    stores,
    llmPupEnv(stores, instance, {
      HOLT_AGENT_NAME: role,
      HOLT_LLM_LIFE: 'true',
      HOLT_LIFE_POLL_MS: '200',
      HOLT_LLM_TOOLS: '[]',
    }),
  );

describe('work_handoff', () => {
  it("gives an open item to another living agent, who is told with the giver's note; both sides audited", async () => {
    const instance = 'handoff1';
    const life = new LifeStore(stores.pool);
    // The first agent makes an item and hands it on; the second only answers.
    stores.llm.reset([
      call('work_create', { objective: 'Reproduce the login timeout' }),
      call('work_update', { todos: [{ text: 'capture a trace', done: true }, { text: 'write the test' }] }),
      call('work_handoff', { to: 'Nobody', note: 'x' }),
      call('work_handoff', { to: 'Tester', note: 'Trace captured; the failing test is left.' }),
      text('handed over'),
      text('I have it'),
    ]);
    await pup(instance, 'Coder');
    await pup(instance, 'Tester');
    // Its loop's first step makes the receiver's life row (running).
    await eventually('Tester living', async () => {
      const r = await stores.pool.query(
        `SELECT 1 FROM holt.agent_life WHERE instance = $1 AND role = 'Tester'`,
        [instance],
      );
      return r.rowCount === 1;
    });
    await life.enqueue({
      instance,
      role: 'Coder',
      key: randomUUID(),
      kind: 'message',
      body: 'Start on the login timeout, then give it to Tester.',
      labels: labelsOf('operator', 'message', 'holt life send', 'operator'),
    });
    stores.nc.publish(lifeWakeSubject(instance, 'Coder'));
    await stores.llm.waitForRequests(6);
    // The two agents' last calls may reach the model in either order: each is found by what it holds.
    const reqs = stores.llm.requests.map((r) => r.body.messages);
    const coder = reqs.find((m) =>
      m.some((x) => x.role === 'tool' && String(x.content).startsWith('handed to')),
    );
    const tools = (coder ?? []).filter((m) => m.role === 'tool').map((m) => String(m.content));
    expect(tools.at(-2)).toMatch(/^error: Nobody is not a running living agent/);
    expect(tools.at(-1)).toMatch(/^handed to Tester: /);

    // Tester's turn opened with the hand-off, as another agent's signal.
    const tester = reqs.find((m) =>
      m.some((x) => x.role === 'user' && String(x.content).includes('work_handoff from')),
    );
    const opening = (tester ?? []).filter((m) => m.role === 'user').map((m) => m.content);
    expect(opening.join('\n')).toMatch(
      /<message origin="agent" surface="work_handoff from Coder" admission="agent Coder" authority="integration_signal"[^>]*>\nWork item [0-9a-f-]+ is now yours, handed over by Coder unfinished: &quot;Reproduce the login timeout&quot;\. Their note: Trace captured; the failing test is left\./,
    );
    const work = new WorkStore(stores.pool);
    expect(await work.list(instance, 'Coder')).toEqual([]);
    const [item] = await work.list(instance, 'Tester');
    expect(item).toMatchObject({ objective: 'Reproduce the login timeout', state: 'open' });
    expect(item?.todos.map((t) => [t.text, t.done])).toEqual([
      ['capture a trace', true],
      ['write the test', false],
    ]);
    const audit = await eventually('both sides audited', async () => {
      const r = await stores.pool.query<{ role: string; decision: string; detail: Record<string, string> }>(
        `SELECT role, decision, detail FROM holt.life_audit WHERE instance = $1 AND decision LIKE 'handoff%' ORDER BY role`,
        [instance],
      );
      return r.rows.length === 2 ? r.rows : undefined;
    });
    expect(audit).toEqual([
      {
        role: 'Coder',
        decision: 'handoff_out',
        detail: expect.objectContaining({ to: 'Tester', item_id: item?.id }),
      },
      {
        role: 'Tester',
        decision: 'handoff_in',
        detail: expect.objectContaining({ from: 'Coder', item_id: item?.id }),
      },
    ]);
  });
});
