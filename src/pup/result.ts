import { z } from 'zod';
import type { NewArtefact } from '../blackboard/client.ts';
import {
  type Artefact,
  type Claim,
  type ClaimType,
  StructuralType,
  type WorkflowEvent,
} from '../blackboard/types.ts';
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

/** Seed 000 §7's short form for escalating a question. */
export const QuestionOutput = z.object({
  structural_type: z.literal('Question'),
  payload: z.string(),
  artefact_type: z.string().min(1).optional(),
});

export interface ResultSpec {
  structural_type: StructuralType;
  type: string;
  payload: string;
  summary?: string;
}

export interface FailureReport {
  reason: string;
  /** -1 when the process never produced an exit code (spawn error, timeout, cap, pup-side failure). */
  exit_code: number;
  stdout: string;
  stderr: string;
}

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

export const FAILURE_TEXT_LIMIT = 5000;

function truncate(s: string): string {
  return s.length > FAILURE_TEXT_LIMIT ? `${s.slice(0, FAILURE_TEXT_LIMIT)}...` : s;
}

/** Holt's ToolExecutionFailure payload: pretty JSON, exit_code omitted when 0, stdout/stderr truncated. */
export function failurePayload(f: FailureReport): string {
  const body: Record<string, unknown> = { reason: f.reason };
  if (f.exit_code !== 0) body.exit_code = f.exit_code;
  body.stdout = truncate(f.stdout);
  body.stderr = truncate(f.stderr);
  body.error = f.reason;
  return JSON.stringify(body, null, 2);
}

/**
 * The report cut down so its payload fits `capBytes` (a Failure must always be storable): the
 * streams first, then the reason. JSON may spell a character in up to 6 bytes, hence the margins.
 */
export function fitFailure(f: FailureReport, capBytes: number): FailureReport {
  if (Buffer.byteLength(failurePayload(f), 'utf8') <= capBytes) return f;
  const keep = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}...` : s);
  const streams = Math.max(0, Math.floor((capBytes - 256) / 24));
  const cut = { ...f, stdout: keep(f.stdout, streams), stderr: keep(f.stderr, streams) };
  if (Buffer.byteLength(failurePayload(cut), 'utf8') <= capBytes) return cut;
  const reason = keep(f.reason, Math.max(0, Math.floor((capBytes - 128) / 12)));
  return { ...cut, reason, stdout: '', stderr: '' };
}

export function failureArtefact(id: string, role: string, claim: Claim, f: FailureReport): NewArtefact {
  return {
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Failure',
    type: 'ToolExecutionFailure',
    payload: failurePayload(f),
    source_artefacts: [claim.artefact_id],
    produced_by_role: role,
  };
}

/** A feedback claim (pending_assignment) asks for a rework of its target; anything else derives. */
export function isRework(claim: Claim): boolean {
  return claim.status === 'pending_assignment';
}

/**
 * Derivative: a new thread (logical_id = id, v1) sourced from the target. Rework: the target's thread at
 * version + 1, the target's type (the tool's is ignored), sourced from the target and the review feedback.
 */
export function resultArtefact(
  id: string,
  role: string,
  claim: Claim,
  target: Artefact,
  r: ResultSpec,
): NewArtefact {
  if (isRework(claim)) {
    return {
      id,
      logical_id: target.logical_id,
      version: target.version + 1,
      structural_type: r.structural_type,
      type: target.type,
      payload: r.payload,
      source_artefacts: [target.id, ...(claim.additional_context_ids ?? [])],
      produced_by_role: role,
    };
  }
  return {
    id,
    logical_id: id,
    version: 1,
    structural_type: r.structural_type,
    type: r.type,
    payload: r.payload,
    source_artefacts: [claim.artefact_id],
    produced_by_role: role,
  };
}

export function reworkEvent(a: Artefact, previous: Artefact): WorkflowEvent {
  return {
    event: 'artefact_reworked',
    data: {
      new_artefact_id: a.id,
      logical_id: a.logical_id,
      new_version: a.version,
      previous_version_id: previous.id,
      artefact_type: a.type,
      produced_by_role: a.produced_by_role,
    },
  };
}

/** The tool's stdin (seed 000 §7), with the real grant type. */
export function toolInput(claimType: ClaimType, target: Artefact, context: Artefact[]): string {
  return JSON.stringify({ claim_type: claimType, target_artefact: target, context_chain: context });
}
