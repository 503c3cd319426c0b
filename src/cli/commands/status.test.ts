import { describe, expect, it } from 'vitest';
import { NO_PRUNE, type RetentionReport } from '../../blackboard/retention-report.ts';
import type { Claim } from '../../blackboard/types.ts';
import { dormantLines, retentionLine } from './status.ts';

const report = (over: Partial<RetentionReport> = {}): RetentionReport => ({
  days: 7,
  last_pass_ms: 1_000_000,
  duration_ms: 12,
  last: NO_PRUNE,
  total: { ...NO_PRUNE, workflows: 3, artefacts: 9, claims: 6, turns: 2, inbox_rows: 2 },
  kept: {},
  ...over,
});

describe('holt status: the retention line', () => {
  it('says the setting, when the last pass ran and what retention removed in all', () => {
    expect(retentionLine(report(), 1_000_000 + 125_000)).toBe(
      'Retention: 7 days; last pass 2m 5s ago; removed 3 workflows (9 artefacts, 6 claims), 2 turns, 2 inbox rows in all',
    );
  });

  it('names the old workflows it kept and a failed pass', () => {
    const line = retentionLine(
      report({ kept: { unfinished: 2, too_large: 1 }, error: 'Postgres: timeout' }),
      1_000_000,
    );
    expect(line).toContain('old workflows kept: 2 unfinished, 1 too large');
    expect(line).toContain('last pass failed: Postgres: timeout');
  });
});

describe('holt status: dormant claims say why', () => {
  // Issue 29: a dormant claim showed only as pending_review=1, with no reason and no hint of the
  // agents whose silence made it dormant.
  const c = (over: Partial<Claim>): Claim => ({
    id: 'c1',
    artefact_id: 'a1',
    status: 'pending_review',
    granted_review_agents: [],
    granted_parallel_agents: [],
    granted_exclusive_agent: '',
    ...over,
  });

  it('lists each with its reason and, when some agents were silent, which (their bid re-opens it)', () => {
    const lines = dormantLines([
      c({ id: 'c1', dormant_reason: 'no_bids_in_any_phase', silent_agents: ['Drafter', 'Linter'] }),
      c({ id: 'c2', dormant_reason: 'no_grants_remaining_after_review' }),
    ]).join('\n');
    expect(lines).toContain('Dormant claims: 2');
    expect(lines).toMatch(/c1\s+no_bids_in_any_phase\s+Drafter,Linter \(a bid from one re-opens it\)/);
    expect(lines).toMatch(/c2\s+no_grants_remaining_after_review\s+-\s+-/);
    expect(dormantLines([])).toEqual([]);
  });

  it("shows each one's trace id, the id to open the stuck workflow by in Jaeger", () => {
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const lines = dormantLines([
      c({ id: 'c1', dormant_reason: 'no_bids_in_any_phase', traceparent: `00-${trace}-00f067aa0ba902b7-01` }),
    ]).join('\n');
    expect(lines).toMatch(/CLAIM\s+REASON\s+SILENT AGENTS\s+TRACE/);
    expect(lines).toMatch(new RegExp(`c1\\s+no_bids_in_any_phase\\s+-\\s+${trace}`));
  });
});
