import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { processStartTime } from './proc.ts';

describe('processStartTime', () => {
  it("names one process: stable while it runs, another process's differs, gone with it", async () => {
    const a = spawn('sleep', ['30']);
    const start = processStartTime(a.pid!);
    expect(start).toMatch(/^\d+$/);
    expect(processStartTime(a.pid!)).toBe(start);
    expect(processStartTime(process.pid)).not.toBe(start); // this process started earlier
    a.kill('SIGKILL');
    await once(a, 'exit');
    expect(processStartTime(a.pid!)).toBeUndefined();
  });
});
