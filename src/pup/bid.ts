import type { Artefact, BidType } from '../blackboard/types.ts';
import { type BidChoice, type BidScriptOutcome, chooseBid } from './decide.ts';
import type { ToolRunner } from './runner/runner.ts';

export interface BidScriptOptions {
  argv: string[];
  cwd: string;
  timeoutMs: number;
  runner: ToolRunner;
  /** The run's idempotency key (claim and role). */
  callId?: string;
}

/** Runs the bid script (artefact JSON on stdin, one word on stdout). Never throws. */
export async function runBidScript(target: Artefact, opts: BidScriptOptions): Promise<BidScriptOutcome> {
  let run: Awaited<ReturnType<ToolRunner['run']>>;
  try {
    run = await opts.runner.run({
      argv: opts.argv,
      cwd: opts.cwd,
      stdin: `${JSON.stringify(target)}\n`,
      timeoutMs: opts.timeoutMs,
      maxBytes: 64 * 1024,
      callId: opts.callId,
    });
  } catch (e) {
    return { ok: false, reason: `bid script could not run: ${(e as Error).message}` };
  }
  if (run.spawnError) return { ok: false, reason: `bid script could not start: ${run.spawnError}` };
  if (run.timedOut) return { ok: false, reason: `bid script timed out after ${opts.timeoutMs} ms` };
  if (run.overflow) return { ok: false, reason: 'bid script printed too much' };
  if (run.exitCode !== 0) {
    return {
      ok: false,
      reason: `bid script exited with ${run.exitCode ?? run.signal}: ${run.stderr.trim().slice(0, 200)}`,
    };
  }
  return { ok: true, stdout: run.stdout };
}

/** The bid for a target: the script if configured, falling back to the strategy, then ignore. */
export async function decideBid(
  target: Artefact,
  strategy: BidType | undefined,
  script: BidScriptOptions | undefined,
): Promise<BidChoice> {
  return chooseBid(script ? await runBidScript(target, script) : undefined, strategy);
}
