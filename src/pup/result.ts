import { z } from 'zod';
import type { FailureReport, ResultSpec } from '../blackboard/results.ts';
import { type Artefact, type ClaimType, StructuralType } from '../blackboard/types.ts';
import { formatIssues } from '../common/config.ts';

/** What a tool process did, as the pup saw it (see tool.ts). */
export interface ToolRun {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** stdout or stderr went over the output cap. */
  overflow: boolean;
  spawnError?: string;
  durationMs: number;
}

/** A run that never started (spawn refused it, or the runner could not be asked). */
export const notStarted = (spawnError: string, durationMs = 0): ToolRun => ({
  exitCode: null,
  signal: null,
  stdout: '',
  stderr: '',
  timedOut: false,
  overflow: false,
  spawnError,
  durationMs,
});

/** The tool's stdout contract (Holt's field names; structural_type optional). */
export const ToolOutput = z.object({
  artefact_type: z.string().min(1, 'must not be empty'),
  artefact_payload: z.string().default(''),
  summary: z.string().min(1, 'must not be empty'),
  structural_type: StructuralType.optional(),
});

/** The short form for asking a question (docs/agent-worker.md § The tool's input and output). */
export const QuestionOutput = z.object({
  structural_type: z.literal('Question'),
  payload: z.string(),
  artefact_type: z.string().min(1).optional(),
});

export type Evaluation = { ok: true; result: ResultSpec } | { ok: false; failure: FailureReport };

function describeMs(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000} minutes` : `${ms} ms`;
}

/** Explicit structural type wins; `Review` as the artefact type means a Review; else Standard. */
export function structuralTypeOf(o: z.infer<typeof ToolOutput>): StructuralType {
  return o.structural_type ?? (o.artefact_type === 'Review' ? 'Review' : 'Standard');
}

/** Parses stdout: exactly one JSON object matching the contract. Never throws. */
export function parseToolStdout(
  stdout: string,
): { ok: true; result: ResultSpec } | { ok: false; reason: string } {
  const text = stdout.trim();
  if (!text) return { ok: false, reason: 'tool produced no output on stdout' };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, reason: `Failed to parse tool output: invalid JSON: ${(e as Error).message}` };
  }
  const std = ToolOutput.safeParse(value);
  if (std.success) {
    const o = std.data;
    return {
      ok: true,
      result: {
        structural_type: structuralTypeOf(o),
        type: o.artefact_type,
        payload: o.artefact_payload,
        summary: o.summary,
      },
    };
  }
  const q = QuestionOutput.safeParse(value);
  if (q.success) {
    return {
      ok: true,
      result: {
        structural_type: 'Question',
        type: q.data.artefact_type ?? 'Question',
        payload: q.data.payload,
      },
    };
  }
  return {
    ok: false,
    reason: `Failed to parse tool output: output does not match the tool contract: ${formatIssues(std.error)}`,
  };
}

/** Turns a finished tool run into a result or a failure report, in Holt's order of checks. */
export function evaluateRun(
  run: ToolRun,
  limits: { timeoutMs: number; outputLimitBytes: number },
): Evaluation {
  const fail = (reason: string, exit_code: number): Evaluation => ({
    ok: false,
    failure: { reason, exit_code, stdout: run.stdout, stderr: run.stderr },
  });
  if (run.spawnError) return fail(`failed to start tool: ${run.spawnError}`, -1);
  if (run.timedOut) return fail(`tool execution timeout (${describeMs(limits.timeoutMs)})`, -1);
  if (run.overflow) return fail(`tool output exceeded the ${limits.outputLimitBytes} byte limit`, -1);
  if (run.exitCode === null) return fail(`process killed by signal ${run.signal ?? 'unknown'}`, -1);
  if (run.exitCode !== 0) return fail(`process exited with code ${run.exitCode}`, run.exitCode);
  const parsed = parseToolStdout(run.stdout);
  if (!parsed.ok) return fail(parsed.reason, 0);
  return { ok: true, result: parsed.result };
}

/** The tool's stdin (docs/agent-worker.md § The tool's input and output), with the real grant type. */
export function toolInput(claimType: ClaimType, target: Artefact, context: Artefact[]): string {
  return JSON.stringify({ claim_type: claimType, target_artefact: target, context_chain: context });
}
