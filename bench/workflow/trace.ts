import { pct, round } from '../lib/proc.ts';

/** The times (epoch ms) one granted claim passed each stage, from the stores, the events and the logs. */
export interface ClaimTimes {
  artefact: number;
  claim: number;
  lastBid: number;
  grant: number;
  pupNotice: number;
  toolStarted: number;
  toolFirstInstruction: number;
}

/** The stages of artefact → tool, in order, each named by what runs in it. */
const STAGES = [
  ['artefact_to_claim', 'orchestrator hears the artefact, writes the claim', 'artefact', 'claim'],
  ['claim_to_last_bid', 'pups hear claim_events, run bid scripts, write bids', 'claim', 'lastBid'],
  ['last_bid_to_grant', 'orchestrator hears the last bid, decides, grants', 'lastBid', 'grant'],
  ['grant_to_pup', 'the grant announcement reaches the pup', 'grant', 'pupNotice'],
  [
    'pup_to_tool_started',
    'pup re-reads the claim, takes the lease, assembles context',
    'pupNotice',
    'toolStarted',
  ],
  ['tool_started_to_first_instruction', 'spawn of the tool', 'toolStarted', 'toolFirstInstruction'],
] as const;

/** Each stage's p50/p99 and its share of the summed artefact → tool time. */
export function traceStages(times: ClaimTimes[]): Record<string, unknown> {
  const total = times.reduce((s, t) => s + (t.toolFirstInstruction - t.artefact), 0);
  const stages: Record<string, unknown> = {};
  for (const [name, what, from, to] of STAGES) {
    const xs = times.map((t) => t[to] - t[from]);
    const sum = xs.reduce((s, x) => s + x, 0);
    stages[name] = { what, p50: pct(xs, 50), p99: pct(xs, 99), share: round(total ? sum / total : 0, 3) };
  }
  return { claims: times.length, stages };
}

/** One log line's event, claim and time, from a pup's JSON log (other lines give null). */
export function logEvent(line: string): { event: string; claim: string; ms: number } | null {
  if (!line.startsWith('{')) return null;
  try {
    const o = JSON.parse(line) as { event_type?: unknown; claim_id?: unknown; timestamp?: unknown };
    if (typeof o.event_type !== 'string' || typeof o.claim_id !== 'string' || typeof o.timestamp !== 'string')
      return null;
    return { event: o.event_type, claim: o.claim_id, ms: Date.parse(o.timestamp) };
  } catch {
    return null;
  }
}
