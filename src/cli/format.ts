import type { Artefact, Claim, WorkflowEvent } from '../blackboard/types.ts';

/** One item of the watch stream, live or replayed. */
export type WatchItem =
  | { kind: 'artefact'; at: number; artefact: Artefact }
  | { kind: 'claim'; at: number; claim: Claim }
  | { kind: 'workflow'; at: number; event: WorkflowEvent };

function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 23);
}

/** Holt's default watch lines; null when Holt suppresses the item (Review and rework artefacts). */
export function formatLine(item: WatchItem): string | null {
  const at = `[${clock(item.at)}]`;
  if (item.kind === 'artefact') {
    const a = item.artefact;
    if (a.structural_type === 'Terminal')
      return `${at} 🎉 Workflow completed: Terminal artefact created (type=${a.type}, id=${a.id})`;
    if (a.structural_type === 'Review' || a.version > 1) return null;
    return `${at} ✨ Artefact created: by=${a.produced_by_role}, type=${a.type}, id=${a.id}`;
  }
  if (item.kind === 'claim') {
    const c = item.claim;
    return `${at} ⏳ Claim created: claim=${c.id}, artefact=${c.artefact_id}, status=${c.status}`;
  }
  const e = item.event;
  switch (e.event) {
    case 'bid_submitted':
      return `${at} 🙋 Bid submitted: agent=${e.data.agent_name}, claim=${e.data.claim_id}, type=${e.data.bid_type}`;
    case 'claim_granted': {
      const img = e.data.agent_image_id
        ? `@${e.data.agent_image_id.replace(/^sha256:/, '').slice(0, 12)}`
        : '';
      return `${at} 🏆 Claim granted: agent=${e.data.agent_name}${img}, claim=${e.data.claim_id}, type=${e.data.grant_type}`;
    }
    case 'review_approved':
      return `${at} ✅ Review Approved: by=${e.data.reviewer_role} for artefact ${e.data.original_artefact_id}`;
    case 'review_rejected':
      return `${at} ❌ Review Rejected: by=${e.data.reviewer_role} for artefact ${e.data.original_artefact_id}`;
    case 'feedback_claim_created':
      return `${at} 🔄 Rework Assigned: to=${e.data.target_agent_role} for claim ${e.data.original_claim_id} (iteration ${e.data.iteration})`;
    case 'artefact_reworked':
      return `${at} 🔄 Artefact Reworked (v${e.data.new_version}): by=${e.data.produced_by_role}, type=${e.data.artefact_type}, id=${e.data.new_artefact_id}`;
    case 'bid_timeout':
      return `${at} ⌛ Bid timeout: claim=${e.data.claim_id}, silent=${e.data.silent_agents.join(',')}`;
    case 'bid_late':
      return `${at} ⌛ Late bid: ${e.data.agent_name} bid ${e.data.bid_type} on claim ${e.data.claim_id}, ${e.data.late_by_ms} ms after the timeout (counted as ignore; a claim dormant without it re-opens)`;
    case 'bidding_reopened':
      return `${at} 🔔 Bidding re-opened: claim=${e.data.claim_id}, late bid from ${e.data.late_bidders.join(',')}`;
    case 'grant_reopened':
      return `${at} ♻️  Grant reopened: ${e.data.agent_name} on claim ${e.data.claim_id}: ${e.data.reason}`;
    case 'quarantined':
      return `${at} 🚫 Quarantined ${e.data.kind} ${e.data.id}${e.data.produced_by_role ? ` by=${e.data.produced_by_role}` : ''}${e.data.claim_id ? ` on claim ${e.data.claim_id}` : ''}: ${e.data.reason}`;
    default:
      return `${at} ❓ Unknown event: ${(e as { event: string }).event}`;
  }
}

/** Holt's JSONL records (second-precision RFC3339), plus workflow_completed after a Terminal. */
export function formatJsonl(item: WatchItem): string[] {
  const timestamp = `${new Date(item.at).toISOString().slice(0, 19)}Z`;
  const line = (event: string, data: unknown) => JSON.stringify({ timestamp, event, data });
  if (item.kind === 'artefact') {
    const a = item.artefact;
    const lines = [line('artefact_created', a)];
    if (a.structural_type === 'Terminal')
      lines.push(
        line('workflow_completed', {
          artefact_id: a.id,
          artefact_type: a.type,
          produced_by: a.produced_by_role,
        }),
      );
    return lines;
  }
  if (item.kind === 'claim') return [line('claim_created', item.claim)];
  return [line(item.event.event, item.event.data)];
}

const TYPE_ABBREV: Record<string, string> = {
  GoalDefined: 'Goal',
  TerraformCode: 'TfCode',
  TerraformDocumentation: 'TfDocs',
  FormattedDocumentation: 'FmtDocs',
  PackagedModule: 'Package',
  ToolExecutionFailure: 'Failure',
};

/** Holt's hoard TYPE column. */
export function abbreviateType(t: string): string {
  const a = TYPE_ABBREV[t] ?? t;
  return a.length > 20 ? `${a.slice(0, 17)}...` : a;
}

/** First non-blank line of a payload, at most 40 characters. */
export function payloadPreview(p: string): string {
  const first = p.split('\n').find((l) => l.trim()) ?? '';
  const t = first.trim();
  return t.length > 40 ? `${t.slice(0, 37)}...` : t;
}

/** Holt's `--type` glob (filepath.Match: * and ?). */
export function globMatch(pattern: string, value: string): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`).test(value);
}
