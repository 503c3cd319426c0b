import { ZodError } from 'zod';
import { formatIssues } from '../common/config.ts';
import { traceFieldsOf } from '../telemetry/carrier.ts';
import { Artefact, Claim, type GrantQueueEntry, type PhaseState } from './types.ts';

/**
 * Holt's hash encodings (pkg/blackboard/serialization.go): every field a string, arrays as JSON,
 * `"null"` for a nil slice (reads back as []), booleans as 1/0, nested objects as JSON or "".
 */
export class BlackboardDataError extends Error {
  /** What the item is (`claim`, `artefact`, ...) and its id: enough to quarantine it. */
  readonly kind: string;
  readonly id: string;
  /** Why it does not parse (field names, never stored text), at most 200 characters. */
  readonly reason: string;

  constructor(kind: string, id: string, cause: unknown) {
    const text =
      cause instanceof ZodError
        ? formatIssues(cause)
        : cause instanceof Error
          ? cause.message
          : String(cause);
    const reason = text.replace(/\s+/g, ' ').slice(0, 200);
    super(`malformed ${kind} ${id} on the blackboard: ${reason}`);
    this.name = 'BlackboardDataError';
    this.kind = kind;
    this.id = id;
    this.reason = reason;
  }
}

/** A field's JSON, or an error that names the field (never the stored text: it may be anything). */
function json(h: Record<string, string>, field: string): unknown {
  try {
    return JSON.parse(h[field] as string);
  } catch {
    throw new Error(`${field}: not valid JSON`);
  }
}

function jsonArray(h: Record<string, string>, field: string): string[] {
  const s = h[field];
  if (!s || s === 'null') return [];
  const v = json(h, field);
  if (!Array.isArray(v)) throw new Error(`${field}: expected a JSON array`);
  return v.map(String);
}

function int(h: Record<string, string>, field: string): number {
  const s = h[field];
  if (s === undefined || s === '') return 0;
  const n = Number(s);
  if (!Number.isInteger(n)) throw new Error(`${field}: expected an integer`);
  return n;
}

export function artefactToHash(a: Artefact): Record<string, string> {
  return {
    id: a.id,
    logical_id: a.logical_id,
    version: String(a.version),
    structural_type: a.structural_type,
    type: a.type,
    payload: a.payload,
    source_artefacts: JSON.stringify(a.source_artefacts),
    produced_by_role: a.produced_by_role,
    created_at_ms: String(a.created_at_ms),
    ...traceFieldsOf(a),
  };
}

export function hashToArtefact(id: string, h: Record<string, string>): Artefact {
  try {
    return Artefact.parse({
      id: h.id,
      logical_id: h.logical_id,
      version: int(h, 'version'),
      structural_type: h.structural_type,
      type: h.type,
      payload: h.payload ?? '',
      source_artefacts: jsonArray(h, 'source_artefacts'),
      produced_by_role: h.produced_by_role,
      created_at_ms: int(h, 'created_at_ms'),
      ...traceFieldsOf(h),
    });
  } catch (e) {
    throw new BlackboardDataError('artefact', id, e);
  }
}

export function claimToHash(c: Claim): Record<string, string> {
  const ext: Record<string, string> = {};
  if (c.expected_bidders) ext.expected_bidders = JSON.stringify(c.expected_bidders);
  if (c.created_at_ms) ext.created_at_ms = String(c.created_at_ms);
  if (c.dormant_reason) ext.dormant_reason = c.dormant_reason;
  if (c.silent_agents?.length) ext.silent_agents = JSON.stringify(c.silent_agents);
  if (c.bids_reopened_at_ms) ext.bids_reopened_at_ms = String(c.bids_reopened_at_ms);
  return {
    ...ext,
    ...traceFieldsOf(c),
    id: c.id,
    artefact_id: c.artefact_id,
    status: c.status,
    granted_review_agents: JSON.stringify(c.granted_review_agents),
    granted_parallel_agents: JSON.stringify(c.granted_parallel_agents),
    granted_exclusive_agent: c.granted_exclusive_agent,
    additional_context_ids: c.additional_context_ids ? JSON.stringify(c.additional_context_ids) : 'null',
    termination_reason: c.termination_reason ?? '',
    phase_state: c.phase_state ? JSON.stringify(c.phase_state) : '',
    grant_queue: c.grant_queue ? JSON.stringify(c.grant_queue) : '',
    last_grant_agent: c.last_grant_agent ?? '',
    last_grant_time: String(c.last_grant_time ?? 0),
    artefact_expected: c.artefact_expected ? '1' : '0',
    granted_agent_image_id: c.granted_agent_image_id ?? '',
  };
}

export function hashToClaim(id: string, h: Record<string, string>): Claim {
  try {
    const ctx = jsonArray(h, 'additional_context_ids');
    return Claim.parse({
      id: h.id,
      artefact_id: h.artefact_id,
      status: h.status,
      granted_review_agents: jsonArray(h, 'granted_review_agents'),
      granted_parallel_agents: jsonArray(h, 'granted_parallel_agents'),
      granted_exclusive_agent: h.granted_exclusive_agent ?? '',
      additional_context_ids: ctx.length ? ctx : undefined,
      termination_reason: h.termination_reason || undefined,
      phase_state: h.phase_state ? (json(h, 'phase_state') as PhaseState) : undefined,
      grant_queue: h.grant_queue ? (json(h, 'grant_queue') as GrantQueueEntry) : undefined,
      last_grant_agent: h.last_grant_agent || undefined,
      last_grant_time: int(h, 'last_grant_time') || undefined,
      artefact_expected: h.artefact_expected === '1' || h.artefact_expected === 'true' || undefined,
      granted_agent_image_id: h.granted_agent_image_id || undefined,
      expected_bidders: h.expected_bidders ? jsonArray(h, 'expected_bidders') : undefined,
      created_at_ms: int(h, 'created_at_ms') || undefined,
      dormant_reason: h.dormant_reason || undefined,
      silent_agents: h.silent_agents ? jsonArray(h, 'silent_agents') : undefined,
      bids_reopened_at_ms: int(h, 'bids_reopened_at_ms') || undefined,
      ...traceFieldsOf(h),
    });
  } catch (e) {
    throw new BlackboardDataError('claim', id, e);
  }
}

/** The claim JSON of claim_events: Holt's names, with its omitempty fields left out when empty. */
export function claimToJson(c: Claim): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: c.id,
    artefact_id: c.artefact_id,
    status: c.status,
    granted_review_agents: c.granted_review_agents,
    granted_parallel_agents: c.granted_parallel_agents,
    granted_exclusive_agent: c.granted_exclusive_agent,
  };
  if (c.additional_context_ids?.length) out.additional_context_ids = c.additional_context_ids;
  if (c.termination_reason) out.termination_reason = c.termination_reason;
  if (c.phase_state) out.phase_state = c.phase_state;
  if (c.grant_queue) out.grant_queue = c.grant_queue;
  if (c.last_grant_agent) out.last_grant_agent = c.last_grant_agent;
  if (c.last_grant_time) out.last_grant_time = c.last_grant_time;
  if (c.artefact_expected) out.artefact_expected = true;
  if (c.granted_agent_image_id) out.granted_agent_image_id = c.granted_agent_image_id;
  if (c.expected_bidders) out.expected_bidders = c.expected_bidders;
  if (c.created_at_ms) out.created_at_ms = c.created_at_ms;
  if (c.dormant_reason) out.dormant_reason = c.dormant_reason;
  if (c.silent_agents?.length) out.silent_agents = c.silent_agents;
  if (c.bids_reopened_at_ms) out.bids_reopened_at_ms = c.bids_reopened_at_ms;
  Object.assign(out, traceFieldsOf(c));
  return out;
}
