import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, submit } from '../../test/harness/llm.ts';
import { type Servers, startServers } from '../../test/harness/llm-runtime.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import { connectBus } from '../bus/connect.ts';
import { ringer } from '../bus/doorbell.ts';
import { silentLogger } from '../common/logger.ts';
import { InboxStore } from '../inbox/store.ts';
import { sweep, Watchdog } from '../inbox/watchdog.ts';
import { answeredQuestions, startOrchestratorInbox } from '../orchestrator/inbox.ts';
import { artefact, grantedClaim, spawnPup } from '../pup/testkit.ts';
import { migrate } from '../state/migrate.ts';

/** LLM agents of a scalable role: turns run on inbox workers (real processes) under the inbox's fence. */

let servers: Servers;
let store: InboxStore;
let nc: NatsConnection;
let ws: string;
const children: ChildProcess[] = [];
const cleanup: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  servers = await startServers();
  await migrate(servers.postgres.url);
  store = InboxStore.connect(servers.postgres.url, { max: 3 });
  nc = await connectBus(servers.nats.url, 'llm-worker-test');
  ws = makeTempDir('llm-worker');
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
  await nc?.drain();
  await store?.close();
  await servers?.stop();
  removeDir(ws);
});

/** An inbox worker process of role `coder` (HOLT_MODE=worker), its log lines collected. */
function spawnWorker(instance: string, env: Record<string, string> = {}) {
  return spawnPup(
    {
      REDIS_URL: servers.redis.url,
      HOLT_INSTANCE_NAME: instance,
      HOLT_WORKSPACE: ws,
      HOLT_MODE: 'worker',
      DATABASE_URL: servers.postgres.url,
      NATS_URL: servers.nats.url,
      HOLT_WORKER_LEASE_MS: '1000',
      HOLT_AGENT_COMMAND: '',
      HOLT_LLM_ENABLED: 'true',
      HOLT_LLM_BASE_URL: servers.llm.url,
      HOLT_LLM_MODEL: 'scripted',
      HOLT_LLM_API_KEY: 'sk-worker-test',
      ...env,
    },
    children,
  );
}

/** A claim granted to `coder` (exclusive) and its inbox row, as the orchestrator's dispatcher makes it. */
async function grantOnInbox(bb: Blackboard, instance: string) {
  const { claim } = await grantedClaim(bb, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' });
  const { row } = await store.enqueue({
    instance,
    workerTarget: 'coder',
    claimId: claim.id,
    role: 'coder',
    claimType: 'exclusive',
    phase: 'exclusive',
  });
  return { claim, row };
}

/**
 * The orchestrator's side of the inbox (its watchdog wakes, rings and reclaims) until the claim's result
 * is on the blackboard and its row committed; then it stops.
 */
async function resultThroughOrchestrator(
  bb: Blackboard,
  instance: string,
  claimId: string,
  rowId: string,
  what: string,
) {
  const orch = await startOrchestratorInbox({
    instance,
    env: { DATABASE_URL: servers.postgres.url, NATS_URL: servers.nats.url, HOLT_INBOX_WATCHDOG_MS: '100' },
    bb,
    isLeader: () => true,
    log: silentLogger(),
  });
  cleanup.push(() => orch.close());
  const id = outputId(instance, claimId, 'coder', 'exclusive');
  const out = await eventually(what, () => bb.getArtefact(id), { timeoutMs: 30_000 });
  await eventually('the row committed', async () => (await store.row(rowId))?.status === 'done');
  await orch.close();
  return { out, id };
}

describe('LLM turns on inbox workers', () => {
  it('a worker frozen past its lease mid-turn: another finishes the turn from the stored steps; the stale one writes nothing', async () => {
    const I = 'llmw-stop';
    const bb = Blackboard.connect(servers.redis.url, I);
    cleanup.push(() => bb.close());
    const marker = join(ws, 'stop-runs.txt');
    const tool = {
      name: 'work',
      description: 'does the work',
      argv: [
        process.execPath,
        '-e',
        `require('fs').appendFileSync(${JSON.stringify(marker)},'run\\n');console.log('did work')`,
      ],
    };
    let openGate: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      openGate = r;
    });
    // Step 1 calls the tool; step 2 of the first worker is held open while it is frozen (and answered
    // only after the takeover); the second worker's step 2 submits.
    servers.llm.reset([
      call('work', {}),
      { after: gate, reply: submit('from the frozen worker') },
      submit('from the second worker'),
    ]);
    const { claim, row } = await grantOnInbox(bb, I);
    const env = { HOLT_LLM_TOOLS: JSON.stringify([tool]) };
    const first = spawnWorker(I, env);
    await servers.llm.waitForRequests(2, 30_000);
    first.child.kill('SIGSTOP');
    expect(readFileSync(marker, 'utf8')).toBe('run\n');

    const second = spawnWorker(I, env);
    const dog = new Watchdog(store, { instance: I, maxAttempts: 5, ring: ringer(nc, I), intervalMs: 100 });
    dog.start();
    cleanup.push(() => dog.stop());
    const id = outputId(I, claim.id, 'coder', 'exclusive');
    const out = await eventually('the result from the second worker', () => bb.getArtefact(id), {
      timeoutMs: 30_000,
    });
    expect(out.payload).toBe('from the second worker');
    await eventually('the row committed', async () => (await store.row(row.id))?.status === 'done');

    // The frozen worker wakes up with its step 2 answered: it can neither record nor commit anything.
    openGate();
    first.child.kill('SIGCONT');
    await eventually(
      'the first worker to finish its run',
      async () => first.output().includes('"event_type":"inbox_claim_finished"'),
      { timeoutMs: 30_000 },
    );
    expect(first.output()).toMatch(/"event_type":"inbox_claim_finished"[^\n]*"outcome":"stale"/);
    await dog.stop();
    for (const w of [first, second]) w.child.kill('SIGTERM');
    await Promise.all([first.exited, second.exited]);

    expect(readFileSync(marker, 'utf8')).toBe('run\n'); // the finished tool call was not repeated
    expect(servers.llm.requests).toHaveLength(3);
    expect(servers.llm.requests[2]!.body.messages.map((m) => m.role)).toEqual([
      'system',
      'user',
      'assistant',
      'tool',
    ]);
    expect(second.output()).toContain('"event_type":"turn_resumed"');
    const all = await bb.getArtefacts(await bb.listArtefactIds());
    expect(all.filter((a) => a?.produced_by_role === 'coder').map((a) => a?.id)).toEqual([id]);
    expect((await bb.getArtefact(id))?.payload).toBe('from the second worker');
    expect(await store.turn(row.turn_id)).toMatchObject({ status: 'done', result_artefact_id: id });
    expect(await store.row(row.id)).toMatchObject({ status: 'done', attempts: 2 });
    // One fencing token: every stored step carries an epoch the inbox handed out, the takeover's last.
    const steps = await store.pool.query<{ seq: number; turn_epoch: string }>(
      'SELECT seq, turn_epoch FROM holt.agent_steps WHERE turn_id = $1 ORDER BY seq',
      [row.turn_id],
    );
    const head = await store.head(I, row.actor_id);
    expect(steps.rows.at(-1)?.turn_epoch).toBe(String(head?.turn_epoch));
  });

  it('ask_question on a worker: the row waits without burning attempts, and the Answer resumes the turn', async () => {
    const I = 'llmw-ask';
    const bb = Blackboard.connect(servers.redis.url, I);
    cleanup.push(() => bb.close());
    servers.llm.reset([call('ask_question', { question: 'Which colour?' }), submit('blue it is')]);
    const { claim, row } = await grantOnInbox(bb, I);
    const w = spawnWorker(I);
    const parked = await eventually(
      'the row parked on the question',
      async () => {
        const r = await store.row(row.id);
        return r?.status === 'waiting' ? r : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const question = await bb.getArtefact(parked.waiting_on ?? '');
    expect(question).toMatchObject({ structural_type: 'Question', payload: 'Which colour?' });
    expect(parked.attempts).toBe(0);
    expect(parked.lease_owner).toBeNull();
    expect(await store.head(I, row.actor_id)).toMatchObject({ status: 'suspended', lease_owner: null });

    // Sweeps without an Answer leave it waiting: not retried, not failed, no model call.
    const ring = ringer(nc, I);
    for (let i = 0; i < 3; i++) {
      const s = await sweep(store, { instance: I, maxAttempts: 1, ring, answered: answeredQuestions(bb) });
      expect(s.woken).toBe(0);
    }
    expect(await store.row(row.id)).toMatchObject({ status: 'waiting', attempts: 0 });
    expect(servers.llm.requests).toHaveLength(1);

    await bb.createArtefact(
      artefact({
        structural_type: 'Answer',
        type: 'Answer',
        payload: 'blue',
        source_artefacts: [question!.id],
        produced_by_role: 'user',
      }),
    );
    // The orchestrator's side of the inbox: its watchdog sees the Answer, wakes the row and rings.
    const { out, id } = await resultThroughOrchestrator(
      bb,
      I,
      claim.id,
      row.id,
      'the result after the answer',
    );
    expect(out.payload).toBe('blue it is');
    w.child.kill('SIGTERM');
    await w.exited;

    expect(servers.llm.requests).toHaveLength(2);
    const tools = servers.llm.requests[1]!.body.messages.filter((m) => m.role === 'tool');
    expect(tools.at(-1)?.content).toContain('"answer":"blue"');
    expect(await store.row(row.id)).toMatchObject({ status: 'done', attempts: 1, waiting_on: null });
    expect(await store.turn(row.turn_id)).toMatchObject({ status: 'done', result_artefact_id: id });
  });

  it('an approval nobody answers on a worker: past its deadline the watchdog wakes the row, the call is refused and the turn goes on to its result', async () => {
    const I = 'llmw-approval-timeout';
    const bb = Blackboard.connect(servers.redis.url, I);
    cleanup.push(() => bb.close());
    const marker = join(ws, 'deploy-runs.txt');
    const deploy = {
      name: 'deploy',
      description: 'deploys',
      argv: [process.execPath, '-e', `require('fs').appendFileSync(${JSON.stringify(marker)},'x')`],
      requireApproval: true,
    };
    servers.llm.reset([call('deploy', {}), submit('not deployed')]);
    const { claim, row } = await grantOnInbox(bb, I);
    const w = spawnWorker(I, {
      HOLT_LLM_TOOLS: JSON.stringify([deploy]),
      HOLT_LLM_APPROVAL_TIMEOUT_MS: '2000',
    });
    // The orchestrator's side, from the start: no Answer will ever come, only the deadline.
    const { out, id } = await resultThroughOrchestrator(
      bb,
      I,
      claim.id,
      row.id,
      'the result after the deadline',
    );
    expect(out.payload).toBe('not deployed');
    w.child.kill('SIGTERM');
    await w.exited;

    // It was parked on the approval (the Question unanswered), then resumed: the call was refused.
    expect(w.output()).toContain('"event_type":"approval_asked"');
    expect(w.output()).toMatch(/"event_type":"claim_waiting"[^\n]*"until_ms":\d+/);
    expect(w.output()).toContain('"event_type":"approval_timed_out"');
    const all = await bb.getArtefacts(await bb.listArtefactIds());
    expect(all.filter((a) => a?.structural_type === 'Answer')).toEqual([]);
    expect(existsSync(marker)).toBe(false);
    expect(servers.llm.requests).toHaveLength(2);
    const tools = servers.llm.requests[1]!.body.messages.filter((m) => m.role === 'tool');
    expect(tools.at(-1)?.content).toMatch(
      /^error: deploy was not run: a person's approval was required and the call was refused: no answer within 2 s/,
    );
    expect(await store.row(row.id)).toMatchObject({ status: 'done', attempts: 1, waiting_on: null });
    expect(await store.turn(row.turn_id)).toMatchObject({ status: 'done', result_artefact_id: id });
  });
});
