import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WorkerExit, workerFailurePayload } from '../blackboard/worker-exits.ts';
import { Scrubber } from '../common/secrets.ts';
import { lastLines, workerExitReport } from './worker-exit.ts';

const dir = mkdtempSync(join(tmpdir(), 'worker-exit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a dead worker's report", () => {
  it('keeps the last 100 lines, whole lines only, of however long a log', () => {
    const f = join(dir, 'long.log');
    writeFileSync(f, `${Array.from({ length: 5000 }, (_, i) => `line ${i} ${'x'.repeat(40)}`).join('\n')}\n`);
    const tail = lastLines(f, 100, 4096).split('\n');
    expect(tail.length).toBeLessThanOrEqual(100);
    expect(tail.at(-1)).toMatch(/^line 4999 x+$/);
    for (const l of tail) expect(l).toMatch(/^line \d+ x{40}$/);
    expect(lastLines(f, 100).split('\n')).toHaveLength(100);
    expect(lastLines(join(dir, 'missing.log'), 100)).toBe('');
  });

  it('gives a signal as 128 + its number, cuts credentials out, and reads as Holt writes it', () => {
    const f = join(dir, 'pup.log');
    writeFileSync(f, 'starting\nconnecting to redis://pup:s3cr3t-password-1@127.0.0.1:6379\n');
    const r = workerExitReport(
      {
        spec: {
          name: 'Coder-worker-0',
          kind: 'worker',
          role: 'Coder',
          command: 'x',
          args: [],
          env: {},
          cwd: '/',
        },
        identity: 'Coder-worker-0-abc',
        code: null,
        signal: 'SIGKILL',
        logFile: f,
        at: 1,
      },
      new Scrubber(['s3cr3t-password-1']),
    );
    expect(WorkerExit.parse(r)).toEqual({
      owner: 'Coder-worker-0-abc',
      role: 'Coder',
      exit_code: 137,
      signal: 'SIGKILL',
      logs: 'starting\nconnecting to redis://pup:[redacted]@127.0.0.1:6379',
      at_ms: 1,
    });
    expect(workerFailurePayload(r as WorkerExit)).toBe(
      'Worker container exited with code 137 (SIGKILL)\n\nLogs:\nstarting\nconnecting to redis://pup:[redacted]@127.0.0.1:6379',
    );
    expect(workerFailurePayload({ ...(r as WorkerExit), signal: undefined, exit_code: 3 })).toMatch(
      /^Worker container exited with code 3\n\nLogs:\n/,
    );
  });
});
