import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { lifeWakeSubject } from '../bus/subjects.ts';
import { subscribeToolResults, type ToolAnswer } from '../bus/tools.ts';
import { FenceLostError } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import { renewWhileRunning } from '../inbox/leases.ts';
import type { Fence } from '../state/schema.ts';
import type { StepStore } from '../state/steps.ts';
import type { Decision } from './scheduler.ts';
import type { Delivery, LifeStore } from './store.ts';
import { emitWaitSpans } from './wait-trace.ts';

/** How a life turn ended, as the loop needs to know it. */
export type LifeTurnEnd =
  | { kind: 'done'; result: unknown }
  | { kind: 'failed'; error: string }
  | { kind: 'suspended' }
  | { kind: 'stale' }
  | { kind: 'aborted' };

export interface LifeLoopDeps {
  instance: string;
  role: string;
  store: LifeStore;
  steps: StepStore;
  /** Runs (or resumes) one life turn under its fence. */
  runTurn: (fence: Fence, delivery: Delivery | undefined, signal: AbortSignal) => Promise<LifeTurnEnd>;
  /** Renews and releases the turn lease (the LLM path's TurnStore); FenceLostError when it is lost. */
  renew: (f: Fence) => Promise<void>;
  release: (f: Fence, status: 'suspended' | 'dispatched') => Promise<void>;
  /** Why no turn may start now (the agent is paused), or null. */
  paused?: () => string | null;
  /** After each pass (the status the operator and `holt status` show). */
  onPass?: () => Promise<void>;
  /** Told of each acting decision, after its commit (events). */
  onDecision?: (d: Decision, delivery: Delivery | undefined, turnId?: string) => void;
  /** Counted: each tool answer by outcome, and the messages a turn's byte cap left queued. */
  counters?: LifeCounters;
  nc?: NatsConnection;
  owner: string;
  leaseMs: number;
  /** The safety net: a pass at least this often, whatever was rung (a doorbell is lossy). */
  pollMs: number;
  log: Logger;
}

export interface LifeCounters {
  toolAnswer(outcome: 'recorded' | 'ignored' | 'invalid'): void;
  deferred(messages: number): void;
}

/**
 * A living agent's loop (docs/runtime-model.md § Living agents), in the agent's pup: each pass asks the scheduler (LifeStore.step:
 * one transaction) and does what it decided: runs a turn to its end, or sleeps until the decision's
 * time, a doorbell (a message came in, a tool answered) or the poll. The first pass runs at start, so
 * an agent is recovered at once: interrupted turns resumed, due timers fired, queued messages
 * delivered.
 */
export class LifeLoop {
  private readonly deps: LifeLoopDeps;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private readonly ac = new AbortController();
  private subs: Subscription[] = [];
  private lastIdle = '';

  constructor(d: LifeLoopDeps) {
    this.deps = d;
  }

  /** Subscribes (confirmed by the server, so no answer to a request sent after this is missed), then passes. */
  async start(): Promise<void> {
    const d = this.deps;
    if (d.nc) {
      this.subs.push(
        d.nc.subscribe(lifeWakeSubject(d.instance, d.role), { callback: () => this.poke() }),
        subscribeToolResults(
          d.nc,
          d.instance,
          d.role,
          (r) => void this.received(r),
          d.log,
          () => d.counters?.toolAnswer('invalid'),
        ),
      );
      await d.nc.flush().catch(() => undefined);
    }
    this.poke();
  }

  /** Another pass as soon as the current one ends (coalesced). */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.pass()
      .catch((e: unknown) => {
        this.deps.log.error(
          { event_type: 'life_pass_failed', error: String(e) },
          'life pass failed; retrying',
        );
        return this.deps.pollMs;
      })
      .then(async (sleepMs) => {
        await this.deps
          .onPass?.()
          .catch((e: unknown) =>
            this.deps.log.warn(
              { event_type: 'life_status_failed', error: String(e) },
              'life status not written',
            ),
          );
        this.running = undefined;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          this.poke();
        } else this.timer = setTimeout(() => this.poke(), sleepMs);
      });
  }

  /**
   * A tool service's answer: recorded once, for the waiting call it is bound to (its reply id and tool,
   * from the subject it came on; the tool it names, if any, must be the same); then a pass to resume the
   * turn. Anything else (another call's, another tool's or another agent's answer) is ignored and counted.
   */
  async received(r: ToolAnswer): Promise<boolean> {
    const d = this.deps;
    const ok =
      (r.tool === undefined || r.tool === r.replyTool) &&
      (await d.store
        .receiveAnswer(d.instance, d.role, {
          replyId: r.replyId,
          tool: r.replyTool,
          turnId: r.turn_id,
          toolCallId: r.tool_call_id,
          result: { ok: r.ok, output: r.output, ...(r.error ? { error: r.error } : {}) },
        })
        .catch(() => false));
    d.counters?.toolAnswer(ok ? 'recorded' : 'ignored');
    const fields = { turn_id: r.turn_id, tool_call_id: r.tool_call_id, tool: r.replyTool };
    if (ok) d.log.info({ event_type: 'tool_result_received', ...fields }, 'tool result recorded');
    else
      d.log.warn(
        { event_type: 'tool_result_ignored', ...fields, ...(r.tool ? { named_tool: r.tool } : {}) },
        'tool result bound to no waiting call of this tool ignored',
      );
    if (ok) this.poke();
    return ok;
  }

  /** Runs decisions until one says to wait or sleep; returns how long to sleep. */
  private async pass(): Promise<number> {
    const d = this.deps;
    for (;;) {
      if (this.stopped) return d.pollMs;
      const paused = d.paused?.();
      if (paused) {
        this.idle(`paused: ${paused}`);
        return d.pollMs;
      }
      const c = await d.store.step(d.instance, d.role, d.owner, d.leaseMs);
      const dec = c.decision;
      if (dec.kind === 'wait' || dec.kind === 'sleep' || dec.kind === 'stop') {
        this.idle(`${dec.kind}: ${dec.why}`);
        const until = dec.kind === 'stop' ? null : dec.untilMs;
        return until === null ? d.pollMs : Math.max(50, Math.min(d.pollMs, until - Date.now() + 20));
      }
      this.lastIdle = '';
      if (dec.kind === 'start' && dec.deferred) d.counters?.deferred(dec.deferred);
      d.log.info(
        { event_type: 'life_decision', decision: dec.kind, why: dec.why, turn_id: c.fence?.turnId },
        `life: ${dec.kind} (${dec.why})`,
      );
      if (c.endedWaits && c.fence) emitWaitSpans(d.role, c.fence.turnId, c.endedWaits);
      d.onDecision?.(dec, c.delivery, c.fence?.turnId);
      if (c.fence) await this.run(c.fence, c.delivery);
    }
  }

  /** Logs a waiting or sleeping decision once, not at every poll. */
  private idle(what: string): void {
    if (what === this.lastIdle) return;
    this.lastIdle = what;
    this.deps.log.debug({ event_type: 'life_idle', what }, `life: ${what}`);
  }

  private async run(fence: Fence, delivery: Delivery | undefined): Promise<void> {
    const d = this.deps;
    const ac = new AbortController();
    const onStop = () => ac.abort();
    this.ac.signal.addEventListener('abort', onStop);
    const stopRenewing = renewWhileRunning(
      d.leaseMs,
      () => d.renew(fence),
      () => {
        d.log.warn({ event_type: 'turn_lease_lost', turn_id: fence.turnId });
        ac.abort();
      },
      (e) => d.log.warn({ event_type: 'turn_lease_renew_failed', turn_id: fence.turnId, error: String(e) }),
    );
    const l = d.log.child({ turn_id: fence.turnId });
    try {
      const end = await d.runTurn(fence, delivery, ac.signal);
      switch (end.kind) {
        case 'done':
        case 'failed': {
          await d.store.finish(
            fence,
            end.kind === 'done'
              ? { status: 'done', result: end.result }
              : { status: 'failed', error: end.error },
          );
          l.info({ event_type: 'life_turn_ended', status: end.kind }, `life turn ${end.kind}`);
          return;
        }
        case 'suspended':
          await d.release(fence, 'suspended');
          l.info({ event_type: 'life_turn_suspended' }, 'life turn waits for tool results');
          return;
        case 'aborted':
          await d.release(fence, 'dispatched').catch(() => false);
          return;
        case 'stale':
          l.warn({ event_type: 'turn_stale' }, 'life turn taken over; nothing written');
          return;
      }
    } catch (e) {
      // The one place a lost fence of the life turn's lease is caught (finish, release).
      if (!(e instanceof FenceLostError)) throw e;
      l.warn({ event_type: 'turn_stale' }, 'life turn taken over; nothing written');
    } finally {
      stopRenewing();
      this.ac.signal.removeEventListener('abort', onStop);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.ac.abort();
    for (const s of this.subs) s.unsubscribe();
    await this.running?.catch(() => undefined);
  }
}
