import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { targetOfRole, workerTarget } from '../blackboard/targets.ts';
import { FenceLostError } from '../common/errors.ts';
import { beginLease, endLease, ensureHead, insertLifeTurn, resumeLease } from '../state/head.ts';
import { lifeActorOf, lifeTurnIdOf } from '../state/ids.ts';
import type { Fence } from '../state/schema.ts';
import { holdsFence, tx } from '../state/sql.ts';
import { carrierOf, carrierOfRow, TraceCarrier } from '../telemetry/carrier.ts';
import { addBlocker, dropWaitBlocker, takeDueRecheck } from '../work/in-tx.ts';
import type { Blocker } from '../work/items.ts';
import { type Enqueued, type EnqueueRequest, enqueueMessage, ensureLifeRow } from './enqueue.ts';
import { LifeReads, type LifeWait, WAIT_COLS, WaitRow } from './reads.ts';
import { type Decision, decide } from './scheduler.ts';
import { readSnapshot } from './snapshot.ts';

/** The life turn's claim id in holt.agent_turns (a life turn answers no claim). */
export const LIFE_CLAIM = 'life';

export type { Enqueued, EnqueueRequest } from './enqueue.ts';
export type { LifeMessage, LifeWait } from './reads.ts';

/** What a life turn was started with (holt.life_turns.delivery). */
export const Delivery = z.object({
  messageIds: z.array(z.string()).default([]),
  waits: z
    .array(z.object({ id: z.uuid(), outcome: z.enum(['resolved', 'timed_out', 'cancelled']) }))
    .default([]),
  tick: z.object({ itemId: z.uuid(), why: z.string() }).optional(),
  why: z.string(),
  /** The trace the turn continues: its first traced message's. Stored with the turn, so a resumed
   * turn continues it too; a malformed one is dropped. */
  trace: TraceCarrier.optional().catch(undefined),
});
export type Delivery = z.infer<typeof Delivery>;

/** A wait a new turn ended: what its span (`life wait`, life/wait-trace.ts) is written from. */
export interface EndedWait {
  id: string;
  kind: LifeWait['kind'];
  outcome: 'resolved' | 'timed_out' | 'cancelled';
  startMs: number;
  endMs: number;
  trace?: TraceCarrier;
}

export type Committed = { decision: Decision; fence?: Fence; delivery?: Delivery; endedWaits?: EndedWait[] };

/** Whose step it is: the agent, and who will run the turn it starts, for how long. */
type StepAt = { instance: string; role: string; actor: string; owner: string; leaseMs: number };

/** One audit row for a decision that acts. */
const audit = (c: pg.PoolClient, at: StepAt, d: Decision, detail: Record<string, unknown>) =>
  c.query('INSERT INTO holt.life_audit (instance, role, decision, detail) VALUES ($1, $2, $3, $4::jsonb)', [
    at.instance,
    at.role,
    d.kind,
    JSON.stringify({ why: d.why, ...detail }),
  ]);

/**
 * A living agent's state in Postgres (docs/runtime-model.md § Living agents): its life row (running or stopped, turn sequence), its
 * messages and waits, its life turns' deliveries and the scheduler's audit trail. `step` is the
 * scheduler's one transaction: lock the agent, read the snapshot, decide (pure), apply, audit.
 */
export class LifeStore extends LifeReads {
  /** The most message bytes one turn is fed (HOLT_LIFE_TURN_BYTES); unlimited when not given. */
  readonly turnBytes: number | undefined;
  constructor(pool: pg.Pool, opts: { turnBytes?: number } = {}) {
    super(pool);
    this.turnBytes = opts.turnBytes;
  }

  /** Queues a message or a wake hint (enqueue.ts). */
  enqueue(m: EnqueueRequest): Promise<Enqueued> {
    return enqueueMessage(this.pool, m);
  }

  async setState(instance: string, role: string, state: 'running' | 'stopped'): Promise<void> {
    await this.pool.query(
      `INSERT INTO holt.agent_life (instance, role, state) VALUES ($1, $2, $3)
       ON CONFLICT (instance, role) DO UPDATE SET state = EXCLUDED.state, updated_at = now()`,
      [instance, role, state],
    );
  }

  /**
   * One scheduler step in one transaction: the agent's life row locked, its snapshot read, the decision
   * taken and applied (a turn started or resumed under a lease for `owner`, its delivery stored), an
   * audit row for every decision that acts. Waiting and sleeping change nothing and store nothing.
   */
  async step(instance: string, role: string, owner: string, leaseMs: number): Promise<Committed> {
    const at: StepAt = { instance, role, actor: lifeActorOf(instance, role), owner, leaseMs };
    return tx<Committed>(this.pool, async (c) => {
      await ensureLifeRow(c, instance, role);
      const decision = decide(await readSnapshot(c, instance, role, at.actor, this.turnBytes));
      if (decision.kind === 'resume') return { value: await this.resume(c, at, decision) };
      if (decision.kind === 'start' || decision.kind === 'tick')
        return { value: await this.begin(c, at, decision) };
      // Waiting and sleeping change nothing and store nothing.
      return { value: { decision } };
    });
  }

  /** A turn whose lease lapsed (or that waits on tool results now in) resumes under a new epoch. */
  private async resume(
    c: pg.PoolClient,
    at: StepAt,
    decision: Extract<Decision, { kind: 'resume' }>,
  ): Promise<Committed> {
    const epoch = await resumeLease(c, leaseOf(at, decision.turnId));
    if (epoch === null) return { decision: { kind: 'wait', untilMs: null, why: 'lost the race to resume' } };
    await audit(c, at, decision, { turn_id: decision.turnId });
    const delivery = await this.delivery(c, decision.turnId);
    return {
      decision,
      delivery,
      fence: fenceOf(at.instance, at.actor, decision.turnId, epoch, at.owner),
    };
  }

  /**
   * A new turn: what wakes it (messages and ended waits, or a work item's due tick) delivered to it, its
   * rows made (head, turn, life turn), and the head leased to `owner` under a new epoch.
   */
  private async begin(
    c: pg.PoolClient,
    at: StepAt,
    decision: Extract<Decision, { kind: 'start' | 'tick' }>,
  ): Promise<Committed> {
    const { instance, role, actor } = at;
    const seqRow = await c.query<{ turn_seq: number }>(
      `UPDATE holt.agent_life SET turn_seq = turn_seq + 1, last_turn_at = now(), updated_at = now()
       WHERE instance = $1 AND role = $2 RETURNING turn_seq`,
      [instance, role],
    );
    const seq = seqRow.rows[0]!.turn_seq;
    const turnId = lifeTurnIdOf(instance, role, seq);
    const messagesTrace =
      decision.kind === 'start' ? await deliverMessages(c, at, turnId, decision.messageIds) : undefined;
    const endedWaits = decision.kind === 'start' ? await endWaits(c, turnId, decision.waits) : [];
    // A turn continues its first traced message's trace, else that of the first wait that woke it.
    const trace = messagesTrace ?? endedWaits.find((w) => w.trace)?.trace;
    const delivery: Delivery =
      decision.kind === 'start'
        ? {
            messageIds: decision.messageIds,
            waits: decision.waits,
            why: decision.why,
            ...(trace ? { trace } : {}),
          }
        : {
            messageIds: [],
            waits: [],
            tick: { itemId: decision.itemId, why: decision.why },
            why: decision.why,
          };
    await ensureHead(c, {
      instance,
      actorId: actor,
      role,
      workerTarget: lifeTarget(role),
      claimId: LIFE_CLAIM,
    });
    await insertLifeTurn(c, { turnId, instance, actorId: actor, claimId: LIFE_CLAIM, role });
    await c.query(
      'INSERT INTO holt.life_turns (turn_id, instance, role, seq, delivery) VALUES ($1, $2, $3, $4, $5::jsonb)',
      [turnId, instance, role, seq, JSON.stringify(delivery)],
    );
    if (delivery.tick) await takeDueRecheck(c, delivery.tick.itemId);
    const epoch = await beginLease(c, leaseOf(at, turnId));
    if (epoch === null) throw new Error(`life head of ${role} is busy although the snapshot saw no turn`);
    await audit(c, at, decision, { turn_id: turnId, seq, delivery });
    return {
      decision,
      delivery,
      fence: fenceOf(instance, actor, turnId, epoch, at.owner),
      ...(endedWaits.length ? { endedWaits } : {}),
    };
  }

  private async delivery(c: Pick<pg.Pool, 'query'>, turnId: string): Promise<Delivery | undefined> {
    const r = await c.query<{ delivery: unknown }>(
      'SELECT delivery FROM holt.life_turns WHERE turn_id = $1',
      [turnId],
    );
    return r.rowCount ? Delivery.parse(r.rows[0]!.delivery) : undefined;
  }

  /** A life turn's delivery (what it was started with), for its opening. */
  deliveryOf(turnId: string): Promise<Delivery | undefined> {
    return this.delivery(this.pool, turnId);
  }

  /**
   * Records a tool service's answer for the agent's waiting asynchronous call it is bound to: the call
   * with this reply id (unguessable, sent only to the services of that tool), this tool, this turn and
   * call id. Any other answer (another call's, another tool's, another agent's, a duplicate) changes
   * nothing and returns false.
   */
  async receiveAnswer(
    instance: string,
    role: string,
    a: { replyId: string; tool: string; turnId: string; toolCallId: string; result: unknown },
  ): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE holt.turn_waiting_tools SET wait_status = 'received', result = $7::jsonb, received_at = now()
       WHERE turn_id = $3 AND tool_call_id = $4 AND instance = $1 AND actor_id = $2 AND tool_name = $5
         AND request->>'reply' = $6 AND wait_status = 'waiting'`,
      [
        instance,
        lifeActorOf(instance, role),
        a.turnId,
        a.toolCallId,
        a.tool,
        a.replyId,
        JSON.stringify(a.result ?? null),
      ],
    );
    return r.rowCount === 1;
  }

  /**
   * The model's wait, under its turn's fence, in one transaction: the wait row and, when it is for an
   * item, the item's blocker (cleared when the wait ends). FenceLostError when the fence is lost.
   */
  async addWait(
    f: Fence,
    role: string,
    w: { kind: LifeWait['kind']; on: string; deadlineMs?: number; itemId?: string },
  ): Promise<LifeWait> {
    const id = randomUUID();
    // The span the wait is set in (the model's tool call): the wait's own span goes under it.
    const trace = carrierOf();
    return tx<LifeWait>(this.pool, async (c) => {
      if (!(await holdsFence(c, f))) throw new FenceLostError();
      const r = await c.query(
        `INSERT INTO holt.agent_waits (id, instance, role, item_id, kind, on_what, deadline, set_by_turn,
           traceparent, tracestate)
         VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::double precision IS NULL THEN NULL
           ELSE to_timestamp($7::double precision / 1000) END, $8, $9, $10)
         RETURNING ${WAIT_COLS}`,
        [
          id,
          f.instance,
          role,
          w.itemId ?? null,
          w.kind,
          w.on,
          w.deadlineMs ?? null,
          f.turnId,
          trace?.traceparent ?? null,
          trace?.tracestate ?? null,
        ],
      );
      if (w.itemId) await addBlocker(c, w.itemId, blockerOf(id, w.kind, w.on, w.deadlineMs));
      return { value: WaitRow.parse(r.rows[0]) };
    });
  }

  /**
   * Ends a life turn under its fence: the head idle, the turn done or failed with its result. A failed
   * turn gives back what it was delivered (its messages, and its ended waits as waiting again), so the
   * next turn gets them, up to MAX_DELIVERIES times each: a failure loses nothing, and cannot loop.
   * FenceLostError, with nothing written, when the fence is lost.
   */
  async finish(
    f: Fence,
    end: { status: 'done' | 'failed'; result?: unknown; error?: string },
  ): Promise<void> {
    await tx(this.pool, async (c) => {
      await endLease(c, f, end);
      await c.query(
        `UPDATE holt.turn_waiting_tools SET wait_status = 'dropped' WHERE turn_id = $1 AND wait_status IN ('waiting', 'received')`,
        [f.turnId],
      );
      if (end.status === 'failed') await this.giveBack(c, f.turnId);
      return { value: undefined };
    });
  }

  /** A failed turn's deliveries, back to be delivered again (each at most MAX_DELIVERIES times). */
  private async giveBack(c: pg.PoolClient, turnId: string): Promise<void> {
    await c.query(
      'UPDATE holt.agent_messages SET turn_id = NULL, delivered_at = NULL WHERE turn_id = $1 AND deliveries < $2',
      [turnId, MAX_DELIVERIES],
    );
    const waits = await c.query(
      `UPDATE holt.agent_waits SET state = 'waiting', turn_id = NULL, ended_at = NULL
       WHERE turn_id = $1 AND deliveries < $2 RETURNING ${WAIT_COLS}`,
      [turnId, MAX_DELIVERIES],
    );
    // Their items wait again too (each blocker was dropped when its wait ended).
    for (const raw of waits.rows) {
      const w = WaitRow.parse(raw);
      if (w.item_id)
        await addBlocker(c, w.item_id, blockerOf(w.id, w.kind, w.on_what, w.deadline_ms ?? undefined));
    }
  }
}

/** How many turns may get one message or one ended wait (a failed turn gives them back). */
export const MAX_DELIVERIES = 3;

/**
 * Delivers the messages to the turn; returns the trace of the first of them that came with one (the
 * turn continues it; a malformed one counts as none).
 */
async function deliverMessages(
  c: pg.PoolClient,
  at: StepAt,
  turnId: string,
  ids: string[],
): Promise<TraceCarrier | undefined> {
  if (!ids.length) return undefined;
  const r = await c.query<{ id: string; traceparent: string | null; tracestate: string | null }>(
    `UPDATE holt.agent_messages SET turn_id = $3, delivered_at = now(), deliveries = deliveries + 1
     WHERE instance = $1 AND role = $2 AND id = ANY($4::bigint[]) AND turn_id IS NULL
     RETURNING id, traceparent, tracestate`,
    [at.instance, at.role, turnId, ids],
  );
  const first = r.rows.filter((m) => m.traceparent).sort((a, b) => Number(a.id) - Number(b.id))[0];
  return first && carrierOfRow(first);
}

/** Ends the waits a new turn is woken by (their items no longer blocked by them), as their spans need them. */
async function endWaits(c: pg.PoolClient, turnId: string, waits: Delivery['waits']): Promise<EndedWait[]> {
  const ended: EndedWait[] = [];
  for (const w of waits) {
    const r = await c.query<{
      item_id: string | null;
      kind: LifeWait['kind'];
      start_ms: string;
      end_ms: string;
      traceparent: string | null;
      tracestate: string | null;
    }>(
      `UPDATE holt.agent_waits SET state = $2, ended_at = now(), turn_id = $3, deliveries = deliveries + 1
       WHERE id = $1 AND state = 'waiting'
       RETURNING item_id, kind, traceparent, tracestate,
         (EXTRACT(EPOCH FROM created_at) * 1000)::bigint AS start_ms,
         (EXTRACT(EPOCH FROM ended_at) * 1000)::bigint AS end_ms`,
      [w.id, w.outcome, turnId],
    );
    const row = r.rows[0];
    if (!row) continue;
    if (row.item_id) await dropWaitBlocker(c, row.item_id, w.id);
    const trace = carrierOfRow(row);
    ended.push({
      id: w.id,
      kind: row.kind,
      outcome: w.outcome,
      startMs: Number(row.start_ms),
      endMs: Number(row.end_ms),
      ...(trace ? { trace } : {}),
    });
  }
  return ended;
}

/** An item's blocker for one of the agent's waits (dropped when the wait ends). */
const blockerOf = (id: string, kind: LifeWait['kind'], on: string, deadlineMs?: number): Blocker => ({
  kind: 'wait',
  wait: kind === 'message' ? 'external' : kind,
  on,
  ...(deadlineMs ? { deadlineMs } : {}),
  waitId: id,
});

/** The life actor's target name in the head row (never rung: life turns are not inbox rows). */
const lifeTarget = (role: string) => workerTarget.parse(`life-${targetOfRole(role)}`.slice(0, 60));

const leaseOf = (at: StepAt, turnId: string) => ({
  instance: at.instance,
  actorId: at.actor,
  turnId,
  owner: at.owner,
  leaseMs: at.leaseMs,
});

const fenceOf = (instance: string, actorId: string, turnId: string, epoch: number, owner: string): Fence => ({
  instance,
  inboxId: '',
  actorId,
  turnId,
  epoch,
  owner,
});
