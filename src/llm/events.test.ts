import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ScriptedReply } from '../../test/harness/llm.ts';
import { llmPupEnv, startPupRuntime, useRuntimeStores } from '../../test/harness/llm-runtime.ts';
import { eventually } from '../../test/harness/wait.ts';
import { outputId } from '../blackboard/grants.ts';
import { ChunkEvent, StepEvent, TaskEvent } from '../bus/events.ts';
import { grantedClaim } from '../pup/testkit.ts';
import { EVERYTHING } from './mcp/mcp.testkit.ts';

/**
 * The events of a real LLM turn, read off NATS by a client of our own as `holt watch` or a dashboard
 * would: the real runtime on real Redis, Postgres and NATS; only the model is the scripted server.
 */

const stores = useRuntimeStores('llm-events');
let n = 0;

type Heard =
  | { kind: 'step'; e: StepEvent }
  | { kind: 'task'; e: TaskEvent }
  | { kind: 'chunk'; e: ChunkEvent }
  | { kind: 'bad'; subject: string; error: string };

/** Every agent event on NATS in arrival order, parsed with the published schemas; subscribed and confirmed. */
async function listen(): Promise<{ heard: Heard[]; stop: () => void }> {
  const heard: Heard[] = [];
  const sub = stores.nc.subscribe('evt.agent.*.*', {
    callback: (_err, m) => {
      const kind = m.subject.split('.').at(-1);
      const schema =
        kind === 'step' ? StepEvent : kind === 'task' ? TaskEvent : kind === 'chunk' ? ChunkEvent : null;
      if (!schema) return;
      const r = schema.safeParse(m.json());
      heard.push(
        r.success
          ? ({ kind, e: r.data } as Heard)
          : { kind: 'bad', subject: m.subject, error: r.error.message },
      );
    },
  });
  await stores.nc.flush(); // the server has the subscription before the turn starts
  return { heard, stop: () => sub.unsubscribe() };
}

/** One turn of the real runtime on a granted claim; the model says what `script` says. */
async function turn(script: ScriptedReply[], env: Record<string, string> = {}) {
  const instance = `ev${++n}`;
  stores.llm.reset(script);
  const { bb, rt } = await startPupRuntime(
    stores,
    llmPupEnv(stores, instance, {
      HOLT_LLM_TOOLS: JSON.stringify([
        { name: 'read', description: 'reads', argv: [process.execPath, '-e', 'console.log("same")'] },
      ]),
      ...env,
    }),
    new Registry(),
  );
  const { claim } = await grantedClaim(bb, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' });
  const outcome = await rt.executor!.execute({ claimId: claim.id, claimType: 'exclusive' });
  return { claim, outcome, deliverable: outputId(instance, claim.id, 'coder', 'exclusive') };
}

const script = (): ScriptedReply[] => [
  {
    text: 'Let me look at the file first.',
    toolCalls: [{ name: 'read', arguments: {} }],
    usage: { prompt_tokens: 111, completion_tokens: 7 },
  },
  {
    text: 'Here is the answer.',
    toolCalls: [
      { name: 'submit_result', arguments: { artefact_type: 'Doc', artefact_payload: 'v1', summary: 's' } },
    ],
    usage: { prompt_tokens: 222, completion_tokens: 9 },
  },
];

/** The turn's events, once its task event (the last one it sends) has arrived. */
async function eventsOf(heard: Heard[], claimId: string) {
  const task = await eventually('the turn’s task event on NATS', () =>
    heard.flatMap((h) => (h.kind === 'task' && h.e.claim_id === claimId ? [h.e] : [])).at(0),
  );
  expect(heard.filter((h) => h.kind === 'bad')).toEqual([]);
  const turnId = task.turn_id;
  const mine = heard.filter((h) => h.kind !== 'bad' && h.e.turn_id === turnId) as Exclude<
    Heard,
    { kind: 'bad' }
  >[];
  return { task, mine };
}

describe('the events of a real LLM turn, read off NATS', () => {
  it('streamed: steps with each reply’s usage, chunks that spell the streamed text, the task event last', async () => {
    const { heard, stop } = await listen();
    const r = await turn(script());
    expect(r.outcome).toBe('success');
    expect(stores.llm.requests.map((q) => q.body.stream)).toEqual([true, true]);
    const { task, mine } = await eventsOf(heard, r.claim.id);
    stop();
    // One publisher connection: NATS keeps its order. Chunks of a reply come before its `replied` step.
    const shape = mine.map((h) => (h.kind === 'step' ? `step:${h.e.phase}` : h.kind));
    const squeezed = shape.filter((s, i) => !(s === 'chunk' && shape[i - 1] === 'chunk'));
    expect(squeezed).toEqual([
      'step:started',
      'chunk',
      'step:replied',
      'step:executing',
      'chunk',
      'step:replied',
      'step:completed',
      'task',
    ]);
    const steps = mine.flatMap((h) => (h.kind === 'step' ? [h.e] : []));
    expect(steps.filter((s) => s.phase === 'replied').map((s) => s.usage)).toEqual([
      { prompt_tokens: 111, completion_tokens: 7 },
      { prompt_tokens: 222, completion_tokens: 9 },
    ]);
    expect(steps.filter((s) => s.phase !== 'replied').every((s) => s.usage === undefined)).toBe(true);
    for (const s of steps) expect(s).toMatchObject({ claim_id: r.claim.id, role: 'coder' });
    // Every event of the turn names the same actor, turn and epoch.
    expect(new Set(mine.map((h) => `${h.e.actor_id}/${h.e.turn_epoch}`)).size).toBe(1);
    const chunks = mine.flatMap((h) => (h.kind === 'chunk' ? [h.e] : []));
    expect(chunks.map((c) => c.seq)).toEqual(chunks.map((_, i) => i));
    expect(chunks.map((c) => c.text).join('')).toBe('Let me look at the file first.Here is the answer.');
    // The scripted server streams content in pieces of 7 characters: more than one chunk per reply.
    expect(chunks.length).toBeGreaterThan(2);
    expect(task).toMatchObject({
      status: 'success',
      claim_id: r.claim.id,
      role: 'coder',
      deliverable_id: r.deliverable,
    });
    expect(task.error).toBeUndefined();
  });

  it('not streamed (HOLT_LLM_STREAM=false): the same steps and usage, no chunks', async () => {
    const { heard, stop } = await listen();
    const r = await turn(script(), { HOLT_LLM_STREAM: 'false' });
    expect(r.outcome).toBe('success');
    expect(stores.llm.requests.map((q) => q.body.stream)).toEqual([false, false]);
    const { task, mine } = await eventsOf(heard, r.claim.id);
    stop();
    expect(mine.map((h) => (h.kind === 'step' ? `step:${h.e.phase}` : h.kind))).toEqual([
      'step:started',
      'step:replied',
      'step:executing',
      'step:replied',
      'step:completed',
      'task',
    ]);
    expect(mine.flatMap((h) => (h.kind === 'step' && h.e.phase === 'replied' ? [h.e.usage] : []))).toEqual([
      { prompt_tokens: 111, completion_tokens: 7 },
      { prompt_tokens: 222, completion_tokens: 9 },
    ]);
    expect(task).toMatchObject({ status: 'success', deliverable_id: r.deliverable });
  });

  it('a turn that fails: a failed step, then the task event with the error and its class', async () => {
    const { heard, stop } = await listen();
    const r = await turn([{ status: 400, body: '{"error":{"message":"bad request"}}' }]);
    expect(r.outcome).toBe('failure');
    const { task, mine } = await eventsOf(heard, r.claim.id);
    stop();
    expect(mine.map((h) => (h.kind === 'step' ? `step:${h.e.phase}` : h.kind))).toEqual([
      'step:started',
      'step:failed',
      'task',
    ]);
    expect(task).toMatchObject({ status: 'failed', deliverable_id: r.deliverable });
    expect(task.error).toMatch(/400|bad request/);
    expect(task.error_class).toBeDefined();
  });

  it("a long MCP call's progress notifications: executing steps naming the tool, in order, before the result", async () => {
    const { heard, stop } = await listen();
    const tool = 'everything__trigger-long-running-operation';
    const r = await turn(
      [
        { toolCalls: [{ name: tool, arguments: { duration: 1, steps: 3 } }] },
        {
          toolCalls: [
            {
              name: 'submit_result',
              arguments: { artefact_type: 'Doc', artefact_payload: 'ran', summary: 's' },
            },
          ],
        },
      ],
      {
        HOLT_LLM_MCP_SERVERS: JSON.stringify([
          { name: 'everything', command: [EVERYTHING], tools: ['trigger-long-running-operation'] },
        ]),
      },
    );
    expect(r.outcome).toBe('success');
    const { mine } = await eventsOf(heard, r.claim.id);
    stop();
    const progress = mine.flatMap((h) => (h.kind === 'step' && h.e.progress ? [h.e] : []));
    // server-everything reports each of its steps; the SDK hands each notification on.
    expect(progress.length).toBeGreaterThan(0);
    for (const e of progress) expect(e).toMatchObject({ phase: 'executing', tool });
    const done = progress.map((e) => e.progress?.done ?? -1);
    expect(done).toEqual([...done].sort((a, b) => a - b));
    expect(progress.at(-1)?.progress?.total).toBe(3);
  });
});
