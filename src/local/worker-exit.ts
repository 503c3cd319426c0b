import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { constants } from 'node:os';
import type { WorkerExit } from '../blackboard/worker-exits.ts';
import type { Scrubber } from '../common/secrets.ts';
import type { ComponentExit } from './supervisor.ts';

/** Holt keeps the last 100 lines of a dead worker's log. */
export const WORKER_LOG_LINES = 100;

/** The last `n` lines of a file, reading at most its last `maxBytes`; '' when it cannot be read. */
export function lastLines(file: string, n: number, maxBytes = 128 * 1024): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const size = fstatSync(fd).size;
    const len = Math.min(size, maxBytes);
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, size - len);
    const lines = buf.toString('utf8').replace(/\n$/, '').split('\n');
    // A cut first line is partial: drop it unless the file was read whole.
    return (len < size ? lines.slice(1) : lines).slice(-n).join('\n');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The report of a worker process that died, as a container runtime would give it: a signal as
 * 128 + its number, the last log lines with every credential this instance holds cut out.
 */
export function workerExitReport(e: ComponentExit, scrub: Scrubber): WorkerExit | undefined {
  if (!e.identity || !e.spec.role) return undefined;
  const signo = e.signal ? (constants.signals as Record<string, number>)[e.signal] : undefined;
  return {
    owner: e.identity,
    role: e.spec.role,
    exit_code: e.code ?? 128 + (signo ?? 0),
    ...(e.signal ? { signal: e.signal } : {}),
    logs: scrub.text(lastLines(e.logFile, WORKER_LOG_LINES)),
    at_ms: e.at,
  };
}
