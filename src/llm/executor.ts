import { existsSync } from 'node:fs';
import { type Blackboard, payloadProblem } from '../blackboard/client.ts';
import type { ErrorClass } from '../blackboard/error-class.ts';
import { type Grant, isGranted, outputId } from '../blackboard/grants.ts';
import { contextLevel } from '../blackboard/pup-reads.ts';
import { failureArtefact, resultArtefact } from '../blackboard/results.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { StructuralType } from '../blackboard/types.ts';
import { type AgentEvents, noAgentEvents } from '../bus/events.ts';
import { errorMessage, FenceLostError } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import type { Scrubber } from '../common/secrets.ts';
import { renewWhileRunning } from '../inbox/leases.ts';
import type { PupConfig } from '../pup/config.ts';
import { assembleContext } from '../pup/context.ts';
import type { ArtefactSink, ExecuteOptions, Outcome } from '../pup/executor.ts';
import type { Fence } from '../state/schema.ts';
import type { StepStore } from '../state/steps.ts';
import { type TraceCarrier, traceFieldsOf } from '../telemetry/carrier.ts';
import type { WorkStore } from '../work/store.ts';
import type { LlmSettings } from './config.ts';
import type { McpHub } from './mcp/hub.ts';
import type { LlmAgent } from './model/agent.ts';
import type { LongMemory } from './stores/long-memory.ts';
import type { MemoryStore } from './stores/memory-store.ts';
import type { PlanStore } from './stores/plan-store.ts';
import type { TurnStore } from './stores/turn-store.ts';
import { Turn, type TurnDeps, type TurnEnd } from './turn/turn.ts';
import { WorkflowRun } from './workflow-run.ts';

export interface LlmExecutorDeps {
  bb: Blackboard;
  cfg: PupConfig;
  settings: LlmSettings;
  agent: LlmAgent;
  store: TurnStore;
  steps: StepStore;
  memory: MemoryStore;
  plans?: PlanStore;
  work?: WorkStore;
  scrub: Scrubber;
  /** The pup's environment: where a remote A2A agent's token is read from (never a tool's). */
  env?: NodeJS.ProcessEnv;
  events?: AgentEvents;
  log: Logger;
  owner: string;
  /** Counts a Failure artefact written, by class (the pup's holt_pup_failures_total). */
  countFailure?: (c: ErrorClass) => void;
  /** The agent's MCP servers (src/llm/mcp). */
  mcp?: McpHub;
  /** Long-term memory (src/memory), when the agent has `llm.memory`. */
  longMemory?: LongMemory;
}

/** On an inbox worker: the worker's fence, sink (fenced commit) and report (waiting, failure reason). */
interface Inbox {
  sink: ArtefactSink;
  report: NonNullable<ExecuteOptions['report']>;
}

/**
 * The LLM path beside the command path (executor.ts): one grant → one turn → exactly one artefact,
 * whose id is the pup's output id (write-once). A standard pup leases the turn in Postgres itself
 * (renewed while it runs); a pup that dies loses the lease after `turnLeaseMs` and the next execution
 * resumes the same turn. On an inbox worker the inbox row's fence is the only fencing token: the turn's
 * steps are written under it, the worker renews it, and the artefact goes to the worker's sink, which
 * writes it inside the worker's fenced commit (a stale worker writes nothing).
 */
export class LlmExecutor {
  private readonly deps: LlmExecutorDeps;
  constructor(d: LlmExecutorDeps) {
    this.deps = d;
  }

  async execute(grant: Grant, signal?: AbortSignal, opts: ExecuteOptions = {}): Promise<Outcome> {
    const { bb, cfg, log } = this.deps;
    const id = outputId(cfg.instance, grant.claimId, cfg.role, grant.claimType);
    const l = log.child({ claim_id: grant.claimId, claim_type: grant.claimType, output_id: id });
    try {
      const vc = await bb.getClaim(grant.claimId);
      if (!vc || !isGranted(vc.claim, cfg.role, grant.claimType)) {
        l.warn({ event_type: 'grant_not_for_me', status: vc?.claim.status ?? 'missing' });
        return 'not_granted';
      }
      if ((await bb.artefactsExist([id]))[0]) {
        // Delivered, but maybe never committed (the pup died in between): close the turn now.
        const g = {
          instance: cfg.instance,
          claimId: grant.claimId,
          role: cfg.role,
          claimType: grant.claimType,
        };
        if (!opts.fence && (await this.deps.store.closeDelivered(g, id)))
          l.warn({
            event_type: 'turn_closed_on_resume',
            reason: 'its artefact was published before the turn committed',
          });
        return 'already_done';
      }
      if (opts.fence) {
        const inbox: Inbox = {
          sink: opts.sink ?? (async (a) => void (await bb.createArtefact(a))),
          report: opts.report ?? (() => undefined),
        };
        return await this.leased(vc.claim, grant, id, opts.fence, l, signal, inbox);
      }
      const acquire = () =>
        this.deps.store.acquire({
          instance: cfg.instance,
          claimId: grant.claimId,
          role: cfg.role,
          claimType: grant.claimType,
          owner: this.deps.owner,
          leaseMs: this.deps.settings.turnLeaseMs,
        });
      let got = await acquire();
      if (got.kind === 'finished') {
        // Finished, yet its output is not on the blackboard (checked above): Redis lost it. Run again.
        const g = {
          instance: cfg.instance,
          claimId: grant.claimId,
          role: cfg.role,
          claimType: grant.claimType,
        };
        const reason = `reopened: the turn was ${got.status} but its output artefact is missing from the blackboard`;
        if (!(await this.deps.store.reopenFinished(g, reason))) return 'already_done';
        l.warn({ event_type: 'grant_reopened', reason });
        await bb
          .publishWorkflowEvent({
            event: 'grant_reopened',
            data: { claim_id: grant.claimId, agent_name: cfg.role, reason },
          })
          .catch(() => undefined);
        got = await acquire();
      }
      if (got.kind === 'busy') return 'leased_elsewhere';
      if (got.kind === 'finished') return 'already_done';
      return await this.leased(vc.claim, grant, id, got.fence, l, signal);
    } catch (e) {
      // The one place a lost fence of the turn's lease is caught (its steps' are caught in the turn).
      if (e instanceof FenceLostError) {
        l.warn({ event_type: 'turn_stale', reason: 'the turn was taken over; nothing written' });
        return 'leased_elsewhere';
      }
      l.error({
        event_type: 'execution_error',
        error: this.deps.scrub.text(errorMessage(e)),
      });
      return 'error';
    }
  }

  private async leased(
    claim: Claim,
    grant: Grant,
    id: string,
    fence: Fence,
    l: Logger,
    signal?: AbortSignal,
    inbox?: Inbox,
  ): Promise<Outcome> {
    const { bb, cfg, settings, store } = this.deps;
    const ev = this.deps.events ?? noAgentEvents;
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    if (signal?.aborted) ac.abort();
    signal?.addEventListener('abort', onAbort);
    // Lost lease = someone else runs the turn now: stop at once (our writes would be refused anyway).
    // On a worker the worker renews the inbox lease (row and head) and aborts `signal` when it is lost.
    const stopRenewing = inbox
      ? undefined
      : renewWhileRunning(
          settings.turnLeaseMs,
          () => store.renew(fence, settings.turnLeaseMs),
          () => {
            l.warn({ event_type: 'turn_lease_lost' });
            ac.abort();
          },
          (e) => l.warn({ event_type: 'turn_lease_renew_failed', error: String(e) }),
        );
    const tl = l.child({ turn_id: fence.turnId, turn_epoch: fence.epoch });
    try {
      const target = await bb.getArtefact(claim.artefact_id);
      const paused = this.deps.agent.pausedReason();
      let end: TurnEnd;
      // The span of the agent's work: its result or Failure continues the workflow's trace from there.
      let trace: TraceCarrier | undefined;
      if (!target)
        end = {
          kind: 'failure',
          reason: `target artefact ${claim.artefact_id} not found`,
          transcript: '',
          errorClass: 'transient',
        };
      else if (paused)
        end = {
          kind: 'failure',
          reason: `agent paused: ${paused}`,
          transcript: '',
          errorClass: this.deps.agent.pausedClass() ?? 'transient',
        };
      else if (!existsSync(cfg.workspace))
        end = {
          kind: 'failure',
          reason: `workspace ${cfg.workspace} does not exist`,
          transcript: '',
          errorClass: 'config',
        };
      else {
        const deps: TurnDeps = {
          agent: this.deps.agent,
          store,
          steps: this.deps.steps,
          memory: this.deps.memory,
          plans: this.deps.plans,
          work: this.deps.work,
          bb,
          settings,
          instance: cfg.instance,
          role: cfg.role,
          systemPrompt: cfg.promptExecution,
          workspace: cfg.workspace,
          fence,
          claim,
          claimType: grant.claimType,
          target,
          context: async () => {
            const roots = [...target.source_artefacts, ...(claim.additional_context_ids ?? [])];
            return (await assembleContext(roots, (ids) => contextLevel(bb, ids))).chain;
          },
          scrub: this.deps.scrub,
          runner: cfg.runner,
          mcp: this.deps.mcp,
          longMemory: this.deps.longMemory,
          events: ev,
          log: tl,
          signal: ac.signal,
        };
        // A workflow agent runs its steps; any other, the ReAct loop: one turn either way, fenced alike.
        const run = settings.workflow ? new WorkflowRun(deps) : new Turn(deps);
        end = await run.run();
        trace = run.trace;
      }
      return await this.conclude(claim, target, id, fence, end, tl, inbox, trace);
    } finally {
      stopRenewing?.();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private async conclude(
    claim: Claim,
    target: Artefact | null,
    id: string,
    fence: Fence,
    end: TurnEnd,
    l: Logger,
    inbox?: Inbox,
    trace?: TraceCarrier,
  ): Promise<Outcome> {
    const { bb, cfg, store, scrub } = this.deps;
    const ev = this.deps.events ?? noAgentEvents;
    const base = {
      actor_id: fence.actorId,
      turn_id: fence.turnId,
      turn_epoch: fence.epoch,
      claim_id: claim.id,
      role: cfg.role,
    };
    switch (end.kind) {
      case 'stale':
        l.warn({ event_type: 'turn_stale', reason: 'the turn was taken over; nothing written' });
        return 'leased_elsewhere';
      case 'aborted':
        if (!inbox) await store.release(fence, 'dispatched').catch(() => false);
        l.warn({ event_type: 'turn_aborted', reason: 'shutdown or lease lost; the turn resumes later' });
        return 'aborted';
      case 'suspended': // only life turns wait for asynchronous tools (a claim's turn is refused them)
        throw new Error('a claim turn cannot suspend on asynchronous tools');
      case 'waiting':
        // On a worker the row parks; the deadline goes with it, so the watchdog wakes it unanswered.
        if (inbox) inbox.report({ waitingOn: end.questionId, waitUntilMs: end.untilMs });
        else await store.release(fence, 'suspended');
        l.info({ event_type: 'turn_waiting', question_id: end.questionId });
        return 'waiting';
      case 'result': {
        const tooBig = payloadProblem(scrub.text(end.result.payload), bb.maxPayloadBytes);
        if (tooBig) {
          const reason = `the model's result was refused: ${tooBig}`;
          return this.conclude(
            claim,
            target,
            id,
            fence,
            { kind: 'failure', reason, transcript: '', errorClass: 'model_output' },
            l,
            inbox,
          );
        }
        const st = StructuralType.safeParse(end.result.structural_type);
        const art = {
          ...resultArtefact(id, cfg.role, claim, target!, {
            structural_type: st.success ? st.data : 'Standard',
            type: end.result.type,
            payload: scrub.text(end.result.payload),
            summary: end.result.summary,
          }),
          ...traceFieldsOf(trace ?? {}),
        };
        if (inbox) {
          // Written by the worker inside its fenced commit; its events follow that commit.
          await inbox.sink(art, async () => undefined);
          l.info({
            event_type: 'turn_result',
            artefact_type: art.type,
            structural_type: art.structural_type,
          });
          return 'success';
        }
        // A lost lease throws FenceLostError (nothing published): execute() ends it leased_elsewhere.
        await store.finish(
          fence,
          { status: 'done', artefactId: id, result: { summary: scrub.text(end.result.summary) } },
          async () => {
            await bb.createArtefact(art);
          },
        );
        l.info({
          event_type: 'artefact_created',
          artefact_type: art.type,
          structural_type: art.structural_type,
        });
        ev.step({ ...base, phase: 'completed', at_ms: Date.now() });
        ev.task({ ...base, status: 'success', deliverable_id: id, at_ms: Date.now() });
        return 'success';
      }
      case 'failure': {
        const reason = scrub.text(end.reason);
        const error_class = end.errorClass;
        this.deps.countFailure?.(error_class);
        const art = {
          ...failureArtefact(id, cfg.role, claim, {
            reason,
            exit_code: -1,
            stdout: '',
            stderr: '',
            error_class,
          }),
          ...traceFieldsOf(trace ?? {}),
        };
        // Holt's failure payload plus what the model did, so a human can see where it went wrong: its
        // end, when the whole would be over the payload cap (the Failure itself must be storable).
        const transcript = scrub.text(end.transcript);
        const room = Math.max(0, Math.floor((bb.maxPayloadBytes - Buffer.byteLength(art.payload) - 64) / 6));
        art.payload = JSON.stringify(
          {
            ...JSON.parse(art.payload),
            transcript:
              transcript.length > room ? `…${transcript.slice(transcript.length - room)}` : transcript,
          },
          null,
          2,
        );
        if (inbox) {
          await inbox.sink(art, async () => undefined);
          inbox.report({ error: reason });
          l.warn({ event_type: 'tool_failed', reason, error_class });
          return 'failure';
        }
        await store.finish(fence, { status: 'failed', artefactId: id, error: reason }, async () => {
          await bb.createArtefact(art);
        });
        l.warn({ event_type: 'tool_failed', reason, error_class });
        ev.step({ ...base, phase: 'failed', at_ms: Date.now() });
        ev.task({
          ...base,
          status: 'failed',
          deliverable_id: id,
          error: reason,
          error_class,
          at_ms: Date.now(),
        });
        return 'failure';
      }
    }
  }
}
