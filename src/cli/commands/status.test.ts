import { describe, expect, it } from 'vitest';
import { NO_PRUNE, type RetentionReport } from '../../blackboard/retention-report.ts';
import { retentionLine } from './status.ts';

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
