import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { settles } from '../blackboard/approval.ts';
import { childrenOf } from '../blackboard/claim-engine.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { outputId } from '../blackboard/grants.ts';
import { getAgents } from '../blackboard/registry.ts';
import { failureArtefact, workerFailureArtefact } from '../blackboard/results.ts';
import { readWorkerExits, WorkerExit } from '../blackboard/worker-exits.ts';
import { busProblem, connectBus, watchBus } from '../bus/connect.ts';
import { ringer } from '../bus/doorbell.ts';
import { type DeliveryEvent, publishDeliveryEvent } from '../bus/events.ts';
import { requestWithHeaders, traceHeaders } from '../bus/message.ts';
import { agentEventsSubject, lifeWakeSubject, lifeWakesSubject } from '../bus/subjects.ts';
import { envMs, parseEnv } from '../common/config.ts';
import type { Logger } from '../common/logger.ts';
import { withTimeout } from '../common/timeout.ts';
import { InboxStore } from '../inbox/store.ts';
import { Watchdog } from '../inbox/watchdog.ts';
import { ensureSchema } from '../state/migrate.ts';
import type { InboxRow, QueueDepth } from '../state/schema.ts';
import type { Grant, GrantDispatcher } from './dispatch.ts';
import { InboxDispatcher } from './inbox-dispatcher.ts';

const blank = (v: unknown) => (v === '' ? undefined : v);

export const OrchestratorInboxEnv = z.object({
  DATABASE_URL: z.preprocess(
    blank,
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
      .optional(),
  ),
  NATS_URL: z.preprocess(
    blank,
    z
      .string()
      .regex(/^(nats|tls):\/\//, 'must be a nats:// URL')
      .optional(),
  ),
  HOLT_INBOX_WATCHDOG_MS: envMs(2_000),
  HOLT_INBOX_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(3),
});

export interface OrchestratorInbox {
  dispatcher: GrantDispatcher;
  /** Undefined without an inbox (no DATABASE_URL/NATS_URL). */
  store: InboxStore | undefined;
  /** Why the inbox cannot work (its NATS connection closed for good), or null: fails /healthz. */
  problem(): string | null;
  /** Why the inbox cannot work right now (NATS reconnecting, Postgres unreachable), or null: /readyz. */
  unready(): Promise<string | null>;
  /** Rings a living agent's wake doorbell (lossy: its loop also polls). */
  wakeLife(role: string): void;
  /** Publishes a delivery's event (lossy). */
  deliveryEvent(e: DeliveryEvent): void;
  /**
   * Calls `changed` on each sign that a living agent changed (its scheduler's events, its wake bells:
   * lossy, so a reader also polls); returns the unsubscribe.
   */
  watchLife?(changed: () => void): () => void;
  /** A NATS request (a delivery to a tool service); its answer, or it throws (no responder, timeout). */
  request?(
    subject: string,
    body: string,
    headers: Record<string, string>,
    timeoutMs: number,
  ): Promise<string>;
  close(): Promise<void>;
}

/**
 * Grants to scalable roles when no inbox is configured: their controller pup only bids, so nobody
 * would ever run them. Each becomes a Failure artefact under the grant's output id (which terminates
 * the claim) with the reason, instead of hanging silently. Idempotent (the output id is fixed).
 */
export class NoInboxDispatcher implements GrantDispatcher {
  readonly instance: string;
  readonly bb: Blackboard;
  readonly log: Logger;
  constructor(o: { instance: string; bb: Blackboard; log: Logger }) {
    this.instance = o.instance;
    this.bb = o.bb;
    this.log = o.log;
  }

  async dispatch(g: Grant): Promise<void> {
    const reason = `no inbox configured for scalable role ${g.role} (set DATABASE_URL and NATS_URL on the orchestrator)`;
    const id = outputId(this.instance, g.claim.id, g.role, g.claimType);
    const { created } = await this.bb.createArtefact(
      failureArtefact(id, g.role, g.claim, {
        reason,
        exit_code: -1,
        stdout: '',
        stderr: '',
        error_class: 'config',
      }),
    );
    if (created)
      this.log.error(
        { event_type: 'scalable_grant_without_inbox', claim_id: g.claim.id, role: g.role, reason },
        'grant to a scalable role failed: no inbox',
      );
  }
}

/**
 * The orchestrator's side of the inbox: the dispatcher for scalable roles and the watchdog, which
 * sweeps only while this orchestrator leads. Without DATABASE_URL and NATS_URL, a NoInboxDispatcher:
 * a grant to a scalable role becomes a Failure artefact naming the missing inbox. A row failed for good becomes a Failure artefact under the
 * grant's output id, which terminates the claim; had a worker written first, the write is a no-op.
 */
export async function startOrchestratorInbox(o: {
  instance: string;
  env: NodeJS.ProcessEnv;
  bb: Blackboard;
  isLeader: () => boolean;
  log: Logger;
  /** Queue depth per worker target after each sweep (the metrics). */
  onDepth?: (depths: QueueDepth[]) => void;
}): Promise<OrchestratorInbox> {
  const env = parseEnv(OrchestratorInboxEnv, o.env);
  if (!env.DATABASE_URL || !env.NATS_URL) {
    o.log.warn(
      { event_type: 'inbox_disabled' },
      'no DATABASE_URL/NATS_URL: grants to scalable roles fail (Failure artefact)',
    );
    const dispatcher = new NoInboxDispatcher({ instance: o.instance, bb: o.bb, log: o.log });
    return {
      dispatcher,
      store: undefined,
      problem: () => null,
      unready: async () => null,
      wakeLife: () => undefined,
      deliveryEvent: () => undefined,
      close: async () => undefined,
    };
  }
  await ensureSchema(env.DATABASE_URL, o.log);
  const store = InboxStore.connect(env.DATABASE_URL);
  let nc: NatsConnection;
  try {
    nc = await connectBus(env.NATS_URL, `orchestrator-${o.instance}`);
  } catch (e) {
    await store.close();
    throw e;
  }
  const ring = ringer(nc, o.instance);
  const watch = watchBus(nc);
  const registration = async (role: string) => (await getAgents(o.bb)).agents.find((a) => a.role === role);
  const targetOf = async (role: string) => (await registration(role))?.worker_target;
  const announce = async (g: Grant) =>
    o.bb.publishWorkflowEvent({
      event: 'claim_granted',
      data: {
        claim_id: g.claim.id,
        agent_name: g.role,
        grant_type: g.claimType,
        agent_image_id: (await registration(g.role))?.image_id ?? '',
      },
    });
  const dispatcher = new InboxDispatcher({
    store,
    instance: o.instance,
    targetOf,
    ring,
    announce,
    outputExists: async (g) =>
      (await o.bb.artefactsExist([outputId(o.instance, g.claim.id, g.role, g.claimType)]))[0] === true,
    reopened: (g, reason) =>
      o.bb
        .publishWorkflowEvent({
          event: 'grant_reopened',
          data: { claim_id: g.claim.id, agent_name: g.role, reason },
        })
        .catch(() => undefined), // lossy: the log and the row say it too
    log: o.log,
  });
  const onFailed = async (row: InboxRow) => {
    const vc = await o.bb.getClaim(row.claim_id);
    if (!vc) return; // the claim is gone: nothing to terminate
    const id = outputId(o.instance, row.claim_id, row.role, row.claim_type);
    const reason = `worker execution failed after ${row.attempts} attempt(s): ${row.last_error ?? 'unknown error'}`;
    // The last worker died and its launcher said how: Holt's WorkerFailure, with its exit and logs.
    const died = WorkerExit.safeParse(row.worker_exit);
    await o.bb.createArtefact(
      died.success
        ? workerFailureArtefact(id, row.role, vc.claim, died.data)
        : // Retries spent on whatever kept failing: the row's last error says what; the class is the retried kind.
          failureArtefact(id, row.role, vc.claim, {
            reason,
            exit_code: -1,
            stdout: '',
            stderr: '',
            error_class: 'transient',
          }),
    );
    o.log.warn(
      { event_type: 'inbox_row_failed', claim_id: row.claim_id, role: row.role, reason },
      'claim failed on workers',
    );
  };
  const answered = answeredQuestions(o.bb);
  const watchdog = new Watchdog(store, {
    instance: o.instance,
    maxAttempts: env.HOLT_INBOX_MAX_ATTEMPTS,
    ring,
    onFailed,
    answered,
    exits: workerExitsReader(o.bb, o.log),
    onDepth: o.onDepth,
    intervalMs: env.HOLT_INBOX_WATCHDOG_MS,
    active: o.isLeader,
    log: o.log,
  });
  watchdog.start();
  return {
    dispatcher,
    store,
    problem: () => busProblem(nc),
    deliveryEvent: (e) => publishDeliveryEvent(nc, e),
    request: (subject, body, h, timeoutMs) => requestWithHeaders(nc, subject, body, h, timeoutMs),
    watchLife(changed) {
      const subjects = [
        agentEventsSubject('life'),
        agentEventsSubject('delivery'),
        lifeWakesSubject(o.instance),
      ];
      const subs = subjects.map((subject) => nc.subscribe(subject, { callback: () => changed() }));
      return () => {
        for (const s of subs) s.unsubscribe();
      };
    },
    wakeLife(role) {
      try {
        nc.publish(lifeWakeSubject(o.instance, role), undefined, traceHeaders());
      } catch {
        // lossy by contract: the agent's loop polls
      }
    },
    async unready() {
      const bus = watch.problem();
      if (bus) return bus;
      try {
        await withTimeout(store.pool.query('SELECT 1'), 2_000, 'ping');
        return null;
      } catch (e) {
        return `Postgres: ${(e as Error).message}`;
      }
    },
    async close() {
      await watchdog.stop();
      await nc.drain().catch(() => undefined);
      await store.close();
    },
  };
}

/**
 * The launchers' worker exit reports, read on from where the last pass stopped. A new leader starts
 * from the oldest kept: a report applies only to leases its worker held when it died, so reading one
 * twice changes nothing.
 */
function workerExitsReader(bb: Blackboard, log: Logger): () => Promise<WorkerExit[]> {
  let cursor = '0';
  return async () => {
    const r = await readWorkerExits(bb.redis, bb.k.workerExits, cursor);
    cursor = r.last;
    if (r.invalid)
      log.warn(
        { event_type: 'worker_exit_invalid', count: r.invalid },
        'unreadable worker exit reports skipped',
      );
    return r.exits;
  };
}

/**
 * The watchdog's question check: of these Question ids, those an Answer settles (children index). A turn
 * parked on a question (ask_question on a worker) is woken once its Answer exists; one parked on an
 * approval, only by a person's Answer (an agent's would wake it to park again, at every sweep).
 */
export function answeredQuestions(bb: Blackboard): (questionIds: string[]) => Promise<string[]> {
  return async (questionIds) => {
    const got: string[] = [];
    for (const q of questionIds) {
      const [question, ...kids] = await bb.getArtefacts([q, ...(await childrenOf(bb, q))]);
      const settled = (a: (typeof kids)[number]) =>
        a?.structural_type === 'Answer' && (!question || settles(question, a));
      if (kids.some(settled)) got.push(q);
    }
    return got;
  };
}
