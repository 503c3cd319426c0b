import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../harness/tmp.ts';
import { countRuns, type ProcessRecord, readRuns } from './runs.ts';

// The drills' tool-run classification on logs written here: a repeat nothing explains is counted as
// unexpected, so the drills' "0 unexpected" can fail.

const dir = makeTempDir('drill-runs');
afterAll(() => removeDir(dir));
let n = 0;

function proc(pid: number, lines: object[], o: { killed?: boolean; worker?: boolean } = {}): ProcessRecord {
  const logFile = join(dir, `p${++n}.log`);
  writeFileSync(logFile, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n{"cut short`);
  return { pid, logFile, killed: o.killed ?? false, worker: o.worker ?? false };
}

const none = new Map<string, number>();

describe('the drills count every tool run', () => {
  it('reads the lines the tool appends', () => {
    const f = join(dir, 'runs.log');
    writeFileSync(f, 'a 10\nb 11\na 12\n');
    expect(readRuns(f)).toEqual([
      { callId: 'a', pid: 10 },
      { callId: 'b', pid: 11 },
      { callId: 'a', pid: 12 },
    ]);
    expect(readRuns(join(dir, 'absent.log'))).toEqual([]);
  });

  it('a call run twice by a live pup that stored its result: unexpected', () => {
    const p = proc(1, [{ event_type: 'artefact_created', output_id: 'a', claim_id: 'c' }]);
    const r = countRuns(
      [
        { callId: 'a', pid: 1 },
        { callId: 'a', pid: 1 },
      ],
      [p],
      none,
    );
    expect(r).toMatchObject({ runs: 2, calls: 1, dupRunsByDesign: 0, dupRunsUnexpected: 1 });
    expect(r.unexpected[0]).toMatchObject({ callId: 'a', runs: 2, pids: [1, 1] });
  });

  it('a pup killed before storing: by design; killed after storing: unexpected', () => {
    const before = proc(1, [{ event_type: 'tool_started', output_id: 'a', claim_id: 'c' }], { killed: true });
    const after = proc(2, [{ event_type: 'artefact_created', output_id: 'b', claim_id: 'd' }], {
      killed: true,
    });
    const r = countRuns(
      [
        { callId: 'a', pid: 1 },
        { callId: 'b', pid: 2 },
        { callId: 'a', pid: 3 },
        { callId: 'b', pid: 3 },
      ],
      [before, after, proc(3, [])],
      none,
    );
    expect(r).toMatchObject({
      runs: 4,
      calls: 2,
      dupRunsByDesign: 1,
      byDesign: { killed_before_stored: 1 },
      dupRunsUnexpected: 1,
    });
    expect(r.unexpected.map((u) => u.callId)).toEqual(['b']);
  });

  it('a tool adopted by init (its pup died before its first line) is put down to the pup that started it', () => {
    const killed = proc(7, [{ event_type: 'tool_started', output_id: 'a', claim_id: 'c' }], { killed: true });
    const next = proc(8, [{ event_type: 'tool_started', output_id: 'a', claim_id: 'c' }]);
    const runs = [
      { callId: 'a', pid: 1 },
      { callId: 'a', pid: 8 },
    ];
    expect(countRuns(runs, [killed, next], none)).toMatchObject({
      byDesign: { killed_before_stored: 1 },
      dupRunsUnexpected: 0,
    });
    // Nobody logged starting it: nothing explains the repeat.
    expect(countRuns(runs, [proc(7, [], { killed: true }), next], none)).toMatchObject({
      dupRunsUnexpected: 1,
    });
  });

  it('a worker: stored means its row done, not the executor’s artefact_created', () => {
    const held = [
      { event_type: 'tool_started', output_id: 'a', claim_id: 'c' },
      { event_type: 'artefact_created', output_id: 'a', claim_id: 'c' },
    ];
    const killedHolding = proc(1, held, { killed: true, worker: true });
    const r = countRuns(
      [
        { callId: 'a', pid: 1 },
        { callId: 'a', pid: 2 },
      ],
      [killedHolding, proc(2, [])],
      none,
    );
    expect(r).toMatchObject({
      dupRunsByDesign: 1,
      byDesign: { killed_before_stored: 1 },
      dupRunsUnexpected: 0,
    });
  });

  it('a failed commit explains one re-run, a reopen (output lost) one more; a third is unexpected', () => {
    const w = proc(
      1,
      [
        { event_type: 'artefact_created', output_id: 'a', claim_id: 'c' },
        { event_type: 'complete_failed', inbox_id: 'row1' },
        { event_type: 'inbox_claim_finished', claim_id: 'c', inbox_id: 'row1', outcome: 'retry' },
        { event_type: 'inbox_claim_finished', claim_id: 'c', inbox_id: 'row1', outcome: 'done' },
      ],
      { worker: true },
    );
    const run = { callId: 'a', pid: 1 };
    expect(countRuns([run, run, run], [w], new Map([['a', 1]]))).toMatchObject({
      dupRunsByDesign: 2,
      byDesign: { store_failed: 1, output_lost: 1 },
      dupRunsUnexpected: 0,
    });
    expect(countRuns([run, run, run, run], [w], new Map([['a', 1]]))).toMatchObject({
      dupRunsByDesign: 2,
      dupRunsUnexpected: 1,
    });
  });
});
