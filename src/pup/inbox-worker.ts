import type { NatsConnection } from '@nats-io/transport-node';
import type { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import { targetOfRole } from '../blackboard/targets.ts';
import { Artefact } from '../blackboard/types.ts';
import { busProblem, connectBus } from '../bus/connect.ts';
import { natsAgentEvents } from '../bus/events.ts';
import { type RetryOptions, retry } from '../common/backoff.ts';
import { errorMessage, isUnreachable } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import { InboxStore } from '../inbox/store.ts';
import { InboxWorker, type Outcome as RowOutcome } from '../inbox/worker.ts';
import type { InboxRow } from '../state/schema.ts';
import { carrierOf } from '../telemetry/carrier.ts';
import type { PupConfig } from './config.ts';
import type { ArtefactSink, ExecuteOptions, GrantExecutor, Outcome } from './executor.ts';
import { leaseOwnerOf, type WorkerEnv } from './worker-env.ts';

export { leaseOwnerOf, loadWorkerEnv, WorkerEnv } from './worker-env.ts';

/** A worker's wait for its stores at start: 12 tries, backoff from 0.5 s to 10 s (about a minute). */
export const STORE_PATIENCE: RetryOptions = { tries: 12, baseMs: 500, maxMs: 10_000 };

/** What a claim run produced: the outcome, and the artefact writes held back for the fenced commit. */
interface RunResult {
  outcome: Outcome;
  writes: { artefact: Artefact; onCreated: (a: Artefact) => Promise<void> }[];
  /** An LLM turn parked on this Question: the row waits for its Answer. */
  waitingOn?: string;
  /** When that wait ends unanswered (its deadline): the row is woken then. */
  waitUntilMs?: number;
  /** A Failure's reason (the turn is recorded failed). */
  error?: string;
}

class RetryableOutcome extends Error {}

/**
 * The pup's inbox-driven worker mode: the generic worker loop (src/inbox/worker.ts) with the pup's
 * executor as the claim run. The executor's artefact goes through a sink that holds it, so the
 * blackboard write happens inside the fence (a stale worker writes nothing), under the grant's output id.
 */
export async function startInboxWorker(o: {
  cfg: PupConfig;
  env: WorkerEnv;
  bb: Blackboard;
  executor: GrantExecutor;
  log: Logger;
  concurrency?: number;
  /** How long to wait for unreachable stores at start (tests shorten it). */
  patience?: RetryOptions;
}): Promise<{ worker: InboxWorker<RunResult>; problem(): string | null; close(): Promise<void> }> {
  const { cfg, env, bb, log } = o;
  // A claim Job's pod may reach its stores only a moment after it starts (a NetworkPolicy engine
  // admits a new pod's address a little later; a store restarts): refusals are retried for about a
  // minute, where exiting at once failed the Job and left its claim to the Job's TTL (the e2e met it).
  const patient = (name: string): RetryOptions => ({
    ...STORE_PATIENCE,
    ...o.patience,
    retryIf: isUnreachable,
    onRetry: (e, attempt, delayMs) =>
      log.warn({
        event_type: 'store_unreachable',
        store: name,
        error: errorMessage(e),
        attempt,
        delay_ms: delayMs,
      }),
  });
  const store = InboxStore.connect(env.DATABASE_URL, { max: env.HOLT_WORKER_CONCURRENCY + 3 });
  let nc: NatsConnection | undefined;
  try {
    nc = await retry(() => connectBus(env.NATS_URL, `worker-${cfg.instance}-${cfg.role}`), patient('nats'));
    await retry(() => store.pool.query('SELECT 1'), patient('postgres'));
  } catch (e) {
    await Promise.allSettled([store.close(), nc?.close()]);
    throw e;
  }
  const target = env.HOLT_WORKER_TARGET ?? targetOfRole(cfg.role);
  const worker = new InboxWorker<RunResult>({
    store,
    nc,
    instance: cfg.instance,
    targets: [target],
    owner: leaseOwnerOf(env),
    concurrency: o.concurrency ?? env.HOLT_WORKER_CONCURRENCY,
    leaseMs: env.HOLT_WORKER_LEASE_MS,
    graceMs: cfg.shutdownGraceMs,
    log,
    events: natsAgentEvents(nc),
    execute: async (row: InboxRow, fence, signal) => {
      const writes: RunResult['writes'] = [];
      const ended: { waitingOn?: string; waitUntilMs?: number; error?: string } = {};
      // Validated now, written later: a bad artefact is the executor's Failure, not a failed commit.
      const sink: ArtefactSink = async (a, onCreated) => {
        writes.push({
          // The span it was made in (written later, outside it): filled in as createArtefact would.
          artefact: Artefact.parse({
            ...a,
            ...(a.traceparent ? {} : carrierOf()),
            created_at_ms: a.created_at_ms || Date.now(),
          }),
          onCreated,
        });
      };
      // The fence goes along: an LLM turn runs its steps under it (one fencing token for the execution).
      const opts: ExecuteOptions = { sink, fenced: true, fence, report: (r) => Object.assign(ended, r) };
      const outcome = await o.executor.execute(
        { claimId: row.claim_id, claimType: row.claim_type },
        signal,
        opts,
      );
      // An LLM turn parked on a Question: the row waits (no attempt burnt) until the Answer exists or
      // the wait's deadline passes.
      if (outcome === 'waiting' && ended.waitingOn)
        return { outcome, writes: [], waitingOn: ended.waitingOn, waitUntilMs: ended.waitUntilMs };
      // error: Redis trouble and the like: retried with backoff.
      if (outcome === 'error' || outcome === 'waiting' || outcome === 'leased_elsewhere')
        throw new RetryableOutcome(`claim run ended with ${outcome}`);
      if (outcome === 'aborted') throw new Error('aborted');
      return { outcome, writes, error: outcome === 'failure' ? ended.error : undefined };
    },
    waitingOn: (result) => result.waitingOn,
    waitUntilMs: (result) => result.waitUntilMs,
    errorOf: (result) => result.error,
    publish: async (_row, result) => {
      for (const w of result.writes) {
        const { created, artefact } = await bb.createArtefact(w.artefact);
        if (created) await w.onCreated(artefact);
      }
    },
    artefactIdOf: (row) => outputId(cfg.instance, row.claim_id, row.role, row.claim_type),
    onOutcome: (row, outcome: RowOutcome) =>
      log.info({ event_type: 'inbox_claim_finished', claim_id: row.claim_id, inbox_id: row.id, outcome }),
  });
  return {
    worker,
    problem: () => busProblem(nc),
    async close() {
      await worker.stop();
      await nc.drain().catch(() => undefined);
      await store.close();
    },
  };
}
