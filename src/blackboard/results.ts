import type { NewArtefact } from './client.ts';
import type { ErrorClass } from './error-class.ts';
import { goEscape } from './go-json.ts';
import type { Artefact, Claim, StructuralType, WorkflowEvent } from './types.ts';
import { type WorkerExit, workerFailurePayload } from './worker-exits.ts';

/**
 * The artefacts an execution ends in, in Holt's shapes: a result (derivative or rework) and a
 * ToolExecutionFailure. Protocol, below every component that writes them (pup, worker, orchestrator).
 */

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
  /** Extension (error-class.ts): which kind of failure this is; Holt's readers ignore it. */
  error_class?: ErrorClass;
}

export const FAILURE_TEXT_LIMIT = 5000;

function truncate(s: string): string {
  return s.length > FAILURE_TEXT_LIMIT ? `${s.slice(0, FAILURE_TEXT_LIMIT)}...` : s;
}

/**
 * Holt's ToolExecutionFailure payload, byte for byte: its FailureData struct in field order, pretty
 * (two spaces), every field but the reason omitted when empty or 0 (Go's omitempty), stdout and
 * stderr truncated, HTML characters escaped as Go's encoder does. Our one extension, `error_class`, comes
 * last and only when known.
 */
export function failurePayload(f: FailureReport): string {
  const body: Record<string, unknown> = { reason: f.reason };
  if (f.exit_code !== 0) body.exit_code = f.exit_code;
  if (f.stdout) body.stdout = truncate(f.stdout);
  if (f.stderr) body.stderr = truncate(f.stderr);
  if (f.reason) body.error = f.reason;
  if (f.error_class) body.error_class = f.error_class;
  return goEscape(JSON.stringify(body, null, 2));
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

/**
 * Holt's WorkerFailure: the worker itself died (its exit code or signal and last log lines), not its
 * tool. Holt leaves source_artefacts empty; ours names the claim's target, so the failure stays in its
 * workflow (docs/holt-compatibility.md).
 */
export function workerFailureArtefact(id: string, role: string, claim: Claim, e: WorkerExit): NewArtefact {
  return {
    ...failureArtefact(id, role, claim, { reason: '', exit_code: e.exit_code, stdout: '', stderr: '' }),
    type: 'WorkerFailure',
    payload: workerFailurePayload(e),
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
