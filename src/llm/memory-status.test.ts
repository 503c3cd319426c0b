import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { call, text } from '../../test/harness/llm.ts';
import {
  llmPupEnv,
  sendLifeMessage,
  startPupRuntime,
  useRuntimeStores,
} from '../../test/harness/llm-runtime.ts';
import { eventually } from '../../test/harness/wait.ts';
import { type AgentStatus, readAgentStatuses } from '../blackboard/agent-status.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { llmAgentLines } from '../cli/commands/status.ts';
import { createLogger } from '../common/logger.ts';
import { labelsOf } from '../life/labels.ts';
import { MemoryStore } from '../memory/store.ts';
import { LongMemory } from './stores/long-memory.ts';

// The long-term memory's counts in the agent's status hash (the Agent's status.memory, `holt status`),
// on real Redis, Postgres and NATS and the scripted model: written at the pup's start, after a save and
// after a recall; cleared by a pup without a memory; a failed write never fails the save.

const stores = useRuntimeStores('memory-status-ws');
let n = 0;

/** A living agent with a memory the model alone writes (no automatic saves) and no recall at a turn's start. */
const pup = (instance: string, memory = true) =>
  startPupRuntime(
    stores,
    llmPupEnv(stores, instance, {
      HOLT_LLM_LIFE: 'true',
      HOLT_LIFE_POLL_MS: '200',
      HOLT_LLM_TOOLS: '[]',
      ...(memory
        ? { HOLT_LLM_MEMORY: 'true', HOLT_LLM_MEMORY_AUTO: 'false', HOLT_LLM_MEMORY_TOP_K: '0' }
        : {}),
    }),
  );

const send = (instance: string, body: string) =>
  sendLifeMessage(stores, instance, body, { origin: 'operator' });

const statusOf = async (bb: Blackboard, instance: string): Promise<AgentStatus | undefined> =>
  (await readAgentStatuses(bb.redis, instance, ['coder'])).get('coder');

describe("the memory's counts in the agent's status", () => {
  it('0 at the start, 1 memory after a memory_save, 1 recall after a memory_search; gone with a pup without memory', async () => {
    const instance = `memst${++n}`;
    stores.llm.reset([
      call('memory_save', { text: 'The release train leaves every Tuesday at noon.' }),
      text('noted'),
    ]);
    const first = await pup(instance);
    // Published before the plugin is up: a fresh agent shows a memory with nothing in it.
    expect(await statusOf(first.bb, instance)).toMatchObject({ memories: 0, memory_recalls: 0 });
    await send(instance, 'Remember that the release train leaves every Tuesday at noon.');
    const saved = await eventually('memories = 1', async () => {
      const s = await statusOf(first.bb, instance);
      return s?.memories === 1 ? s : undefined;
    });
    expect(saved).toMatchObject({ memories: 1, memory_recalls: 0, state: 'active', life_state: 'running' });

    stores.llm.reset([call('memory_search', { query: 'release train Tuesday' }), text('Tuesday at noon')]);
    await send(instance, 'When does the release train leave?');
    await stores.llm.waitForRequests(2);
    expect(String(stores.llm.requests[1]!.body.messages.at(-1)?.content)).toContain('release train');
    const recalled = await eventually('memory_recalls = 1', async () => {
      const s = await statusOf(first.bb, instance);
      return s?.memory_recalls === 1 ? s : undefined;
    });
    expect(recalled.memories).toBe(1);
    // What `holt status` prints for it.
    expect(llmAgentLines(new Map([['coder', recalled]])).join('\n')).toContain(
      'Long-term memories: coder 1 (recalled 1 time)',
    );
    await first.stop();

    // The spec lost its memory: its pup clears the counts, so no status shows a memory it has not.
    const second = await pup(instance, false);
    const s = await statusOf(second.bb, instance);
    expect(s?.memories).toBeUndefined();
    expect(llmAgentLines(new Map([['coder', s!]])).join('\n')).not.toContain('Long-term memories');
  });

  it('a failed status write is logged, and the save still answers', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const lm = new LongMemory({
      store: new MemoryStore(stores.pool),
      settings: { scope: 'agent', topK: 0, ttlDays: 0, auto: false, embeddings: undefined },
      instance: `memst${++n}`,
      log: createLogger('test', {}, sink),
      onCounts: async () => {
        throw new Error('NOPERM this user has no permissions to access the key');
      },
    });
    const r = await lm.save('coder', {
      body: 'Builds run on the big runners.',
      kind: 'note',
      source: { kind: 'turn' },
      labels: labelsOf('operator', 'message', 'test', 'test'),
    });
    expect(r.outcome).toBe('saved');
    await lm.publishCounts('coder'); // never rejects
    await eventually('the failure logged', async () =>
      lines.some((l) => l.includes('"event_type":"memory_status_failed"')) ? true : undefined,
    );
    expect(await lm.counts('coder')).toEqual({ memories: 1, recalls: 0 });
  });
});
