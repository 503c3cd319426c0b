import { existsSync } from 'node:fs';
import { type Blackboard, payloadProblem } from '../blackboard/client.ts';
import type { ErrorClass } from '../blackboard/error-class.ts';
import { acquireExecution, releaseExecution, renewExecution } from '../blackboard/execution-lease.ts';
import { type Grant, isGranted, outputId } from '../blackboard/grants.ts';
import { contextLevel } from '../blackboard/pup-reads.ts';
import {
  type FailureReport,
  failureArtefact,
  fitFailure,
  isRework,
  resultArtefact,
  reworkEvent,
} from '../blackboard/results.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { errorMessage } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import { Scrubber } from '../common/secrets.ts';
import { carrierEnv, carrierOf } from '../telemetry/carrier.ts';
import { invokeAgent, markFailed } from '../telemetry/spans.ts';
import type { PupConfig } from './config.ts';
import { assembleContext } from './context.ts';
import type { ArtefactSink, ExecuteOptions, GrantExecutor, Outcome } from './executor.ts';
import { commitRefProblem } from './git.ts';
import type { PupMetrics } from './metrics.ts';
import { MAX_QUESTIONS_PER_GRANT, questionArtefact, questionId, questionState } from './questions.ts';
import { redisRetry } from './redis-retry.ts';
import { evaluateRun, toolInput } from './result.ts';

export interface ExecutorDeps {
  bb: Blackboard;
  cfg: PupConfig;
  log: Logger;
  metrics: PupMetrics;
  /** This process's identity for execution leases. */
  owner: string;
}

/**
 * The command executor: runs one grant's tool (HOLT_AGENT_COMMAND) to exactly one artefact. The output id is derived from the grant, artefacts are
 * write-once, and a Redis lease covers the run: a duplicate announcement, a re-scan or a second pup never
 * yields a second result. If the pup dies between running the tool and writing, the lease expires and
 * the re-scan runs the grant again (at-least-once tool runs, exactly-once result).
 */
export class CommandExecutor implements GrantExecutor {
  private readonly deps: ExecutorDeps;
  /** Tool output can echo anything; credentials the pup holds are cut out of failure payloads. */
  private readonly scrub: Scrubber;
  constructor(deps: ExecutorDeps) {
    this.deps = deps;
    this.scrub = new Scrubber(deps.cfg.secrets);
  }

  private redis<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return redisRetry(this.deps.cfg.redisRetries, this.deps.log, what, fn);
  }

  async execute(grant: Grant, signal?: AbortSignal, opts: ExecuteOptions = {}): Promise<Outcome> {
    const sink = opts.sink ?? this.toBlackboard;
    const { bb, cfg, log, owner } = this.deps;
    const id = outputId(cfg.instance, grant.claimId, cfg.role, grant.claimType);
    const l = log.child({ claim_id: grant.claimId, claim_type: grant.claimType, output_id: id });
    try {
      const vc = await this.redis('get_claim', () => bb.getClaim(grant.claimId));
      if (!vc || !isGranted(vc.claim, cfg.role, grant.claimType)) {
        l.warn({ event_type: 'grant_not_for_me', status: vc?.claim.status ?? 'missing' });
        return 'not_granted';
      }
      const [exists] = await this.redis('output_exists', () => bb.artefactsExist([id]));
      if (exists) {
        l.info({ event_type: 'grant_already_executed' });
        return 'already_done';
      }
      // An inbox worker's fence (Postgres lease + epoch) replaces the Redis execution lease. The lease
      // is short and renewed while the run lasts: a pup killed mid-run holds up the grant for at most
      // one lease, not for the tool's whole timeout.
      const ttl = cfg.executionLeaseMs;
      if (!opts.fenced && !(await this.redis('lease', () => acquireExecution(bb, id, owner, ttl)))) {
        l.info({ event_type: 'grant_leased_elsewhere' });
        return 'leased_elsewhere';
      }
      const heartbeat = opts.fenced
        ? undefined
        : setInterval(
            () => {
              renewExecution(bb, id, owner, ttl).then(
                (ours) => {
                  if (!ours) l.warn({ event_type: 'execution_lease_lost' });
                },
                () => undefined, // Redis trouble: the next beat tries again
              );
            },
            Math.max(50, Math.floor(ttl / 3)),
          );
      try {
        // The agent's invocation continues the claim's trace; what it writes carries this span.
        return await invokeAgent(cfg.role, { ...vc.claim, id: grant.claimId }, {}, async (span) => {
          const outcome = await this.run(vc.claim, grant, id, l, sink, opts, signal);
          span.setAttribute('holt.outcome', outcome);
          if (outcome === 'failure' || outcome === 'error') markFailed(span, outcome);
          return outcome;
        });
      } finally {
        clearInterval(heartbeat);
        if (!opts.fenced) await releaseExecution(bb, id, owner).catch(() => undefined);
      }
    } catch (e) {
      l.error({ event_type: 'execution_error', error: errorMessage(e) });
      return 'error';
    }
  }

  private async run(
    claim: Claim,
    grant: Grant,
    id: string,
    l: Logger,
    sink: ArtefactSink,
    opts: ExecuteOptions,
    signal?: AbortSignal,
  ): Promise<Outcome> {
    const { bb, cfg, metrics } = this.deps;
    const fail = (reason: string, error_class: ErrorClass): FailureReport => ({
      reason,
      exit_code: -1,
      stdout: '',
      stderr: '',
      error_class,
    });
    let target: Artefact | null;
    try {
      target = await this.redis('get_target', () => bb.getArtefact(claim.artefact_id));
    } catch (e) {
      return this.writeFailure(
        claim,
        id,
        fail(`failed to fetch target artefact: ${(e as Error).message}`, 'transient'),
        l,
        sink,
      );
    }
    if (!target)
      return this.writeFailure(
        claim,
        id,
        fail(`target artefact ${claim.artefact_id} not found`, 'transient'),
        l,
        sink,
      );
    if (!existsSync(cfg.workspace)) {
      return this.writeFailure(
        claim,
        id,
        fail(`workspace ${cfg.workspace} does not exist`, 'config'),
        l,
        sink,
      );
    }
    // A tool that asked a Question waits for its Answer; answered, it runs again with the Q&A in context.
    const questions = await this.redis('questions', () => questionState(bb, id));
    if (questions.waitingOn) {
      opts.report?.({ waitingOn: questions.waitingOn });
      l.info({ event_type: 'grant_waiting', question_id: questions.waitingOn });
      return 'waiting';
    }
    let stdin: string;
    try {
      const roots = [
        ...target.source_artefacts,
        ...(claim.additional_context_ids ?? []),
        ...questions.answers.map((a) => a.id),
      ];
      const ctx = await assembleContext(roots, (ids) =>
        this.redis('context_level', () => contextLevel(bb, ids)),
      );
      if (ctx.malformed.length) l.warn({ event_type: 'context_malformed', ids: ctx.malformed });
      stdin = toolInput(grant.claimType, target, ctx.chain);
      l.info({ event_type: 'tool_started', context_size: ctx.chain.length, context_levels: ctx.levels });
    } catch (e) {
      return this.writeFailure(
        claim,
        id,
        fail(`input preparation failed: ${(e as Error).message}`, 'transient'),
        l,
        sink,
      );
    }
    // The tool never sees the pup's credentials: an allowlisted environment, or another container.
    const run = await cfg.runner.run(
      {
        argv: cfg.command ?? [],
        cwd: cfg.workspace,
        stdin,
        timeoutMs: cfg.toolTimeoutMs,
        maxBytes: cfg.outputLimitBytes,
        // Stable across re-runs of this grant: the output artefact's id.
        callId: id,
        // The invocation's span: a tool that traces continues it.
        env: carrierEnv(carrierOf()),
      },
      signal,
    );
    if (signal?.aborted) {
      l.warn({ event_type: 'tool_aborted', reason: 'shutdown grace period over; the grant stays open' });
      return 'aborted';
    }
    const ev = evaluateRun(run, { timeoutMs: cfg.toolTimeoutMs, outputLimitBytes: cfg.outputLimitBytes });
    const secs = run.durationMs / 1000;
    if (!ev.ok) {
      metrics.toolDuration.observe({ outcome: 'failure' }, secs);
      return this.writeFailure(claim, id, { ...ev.failure, error_class: 'tool' }, l, sink);
    }
    // A rework keeps the target's type, so check either name (a reworked CodeCommit is a commit too).
    if (ev.result.type === 'CodeCommit' || (isRework(claim) && target.type === 'CodeCommit')) {
      // A full id only (a name such as `:README` or `HEAD` is resolved by git); the check itself runs
      // where the tools run, never in the pup (src/pup/git.ts).
      const problem = commitRefProblem(ev.result.payload);
      const c = problem
        ? { ok: false, detail: problem }
        : await cfg.runner.commit({ root: cfg.workspace, rev: ev.result.payload });
      if (!c.ok) {
        metrics.toolDuration.observe({ outcome: 'failure' }, secs);
        const reason = `Tool succeeded but artefact creation failed: git commit validation failed for ${JSON.stringify(ev.result.payload)}: ${c.detail}`;
        return this.writeFailure(
          claim,
          id,
          { reason, exit_code: 0, stdout: run.stdout, stderr: run.stderr, error_class: 'tool' },
          l,
          sink,
        );
      }
    }
    // The tool holds no credential, but its output is untrusted: nothing the pup holds leaves in it.
    const result = { ...ev.result, payload: this.scrub.text(ev.result.payload) };
    if (result.structural_type === 'Question') {
      if (questions.next >= MAX_QUESTIONS_PER_GRANT) {
        metrics.toolDuration.observe({ outcome: 'failure' }, secs);
        const reason = `Tool asked more than ${MAX_QUESTIONS_PER_GRANT} questions in one grant`;
        return this.writeFailure(
          claim,
          id,
          { reason, exit_code: 0, stdout: run.stdout, stderr: run.stderr, error_class: 'tool' },
          l,
          sink,
        );
      }
      // Written now, even by a fenced worker: its id is the grant's own, so a second run cannot add one.
      const qid = questionId(id, questions.next);
      await this.redis('write_question', () =>
        bb.createArtefact(questionArtefact(qid, cfg.role, target, result)),
      );
      metrics.toolDuration.observe({ outcome: 'question' }, secs);
      opts.report?.({ waitingOn: qid });
      l.info({ event_type: 'question_asked', question_id: qid });
      return 'waiting';
    }
    const tooBig = payloadProblem(result.payload, bb.maxPayloadBytes);
    if (tooBig) {
      metrics.toolDuration.observe({ outcome: 'failure' }, secs);
      const reason = `Tool succeeded but its result was refused: ${tooBig}`;
      return this.writeFailure(
        claim,
        id,
        { reason, exit_code: 0, stdout: run.stdout, stderr: run.stderr, error_class: 'tool' },
        l,
        sink,
      );
    }
    const artefact = resultArtefact(id, cfg.role, claim, target, result);
    try {
      await sink(artefact, async (written) => {
        if (isRework(claim))
          await this.redis('rework_event', () => bb.publishWorkflowEvent(reworkEvent(written, target)));
      });
    } catch (e) {
      // e.g. a claim whose additional_context_ids are not artefact ids: the result cannot be stored as is
      const reason = `Tool succeeded but artefact creation failed: ${(e as Error).message}`;
      return this.writeFailure(
        claim,
        id,
        { reason, exit_code: 0, stdout: run.stdout, stderr: run.stderr, error_class: 'tool' },
        l,
        sink,
      );
    }
    metrics.toolRuns.inc({ outcome: 'success' });
    metrics.toolDuration.observe({ outcome: 'success' }, secs);
    l.info({
      event_type: 'artefact_created',
      artefact_type: artefact.type,
      structural_type: artefact.structural_type,
      version: artefact.version,
      duration_ms: Math.round(run.durationMs),
    });
    return 'success';
  }

  private async writeFailure(
    claim: Claim,
    id: string,
    f: FailureReport,
    l: Logger,
    sink: ArtefactSink,
  ): Promise<Outcome> {
    this.deps.metrics.toolRuns.inc({ outcome: 'failure' });
    this.deps.metrics.failures.inc({ class: f.error_class ?? 'tool' });
    const report = {
      ...f,
      reason: this.scrub.text(f.reason),
      stdout: this.scrub.text(f.stdout),
      stderr: this.scrub.text(f.stderr),
    };
    l.warn({
      event_type: 'tool_failed',
      reason: report.reason,
      exit_code: f.exit_code,
      error_class: f.error_class,
    });
    const fitted = fitFailure(report, this.deps.bb.maxPayloadBytes);
    await sink(failureArtefact(id, this.deps.cfg.role, claim, fitted), async () => undefined);
    return 'failure';
  }

  /** The default sink: write the artefact now (write-once by id). */
  private readonly toBlackboard: ArtefactSink = async (artefact, onCreated) => {
    const { created, artefact: written } = await this.redis('write_result', () =>
      this.deps.bb.createArtefact(artefact),
    );
    if (created) await onCreated(written);
  };
}
