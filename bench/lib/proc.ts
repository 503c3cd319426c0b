import { readdirSync, readFileSync } from 'node:fs';

/** Shared by the benches: percentiles and what the kernel says a process spent. */

export const round = (x: number, d = 2) => Number(x.toFixed(d));

export function pct(xs: number[], p: number): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN);
}

/** CPU seconds a thread has run (/proc/<pid>/task/<tid>/schedstat: nanoseconds, not 10 ms ticks). */
export function threadCpu(pid: number, tid: number | string): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e9;
  } catch {
    return 0; // the thread ended between listing and reading
  }
}

/**
 * CPU seconds of a process: all its threads, and its main thread alone. For Node the main thread is
 * the event loop, which alone bounds throughput; the others are V8's garbage collection and compiler
 * helpers, which run beside it on other cores. Redis's main thread is likewise the one that serves.
 */
export function procCpu(pid: number | undefined): { all: number; main: number } {
  if (!pid) return { all: Number.NaN, main: Number.NaN };
  const all = readdirSync(`/proc/${pid}/task`).reduce((sum, tid) => sum + threadCpu(pid, tid), 0);
  return { all, main: threadCpu(pid, pid) };
}

/**
 * CPU seconds of a process's waited-for children (/proc/<pid>/stat cutime + cstime, in clock ticks of
 * 1/100 s): for a pup, its tools and bid scripts.
 */
export function childrenCpu(pid: number | undefined): number {
  if (!pid) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Resident memory of a process in MB (VmRSS). */
export function rssMb(pid: number | undefined): number {
  if (!pid) return Number.NaN;
  try {
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? round(Number(kb) / 1024, 1) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * The median of several runs' results, leaf by leaf: numbers by their median, objects key by key, any
 * other value from the first run. (Medians per figure: each comes from whichever run was the middle one.)
 */
export function medianOf(runs: unknown[]): unknown {
  const first = runs[0];
  if (typeof first === 'number') {
    const xs = runs.filter((x): x is number => typeof x === 'number').sort((a, b) => a - b);
    const mid = Math.floor(xs.length / 2);
    return round(xs.length % 2 ? (xs[mid] as number) : ((xs[mid - 1] as number) + (xs[mid] as number)) / 2);
  }
  if (first && typeof first === 'object' && !Array.isArray(first)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(first))
      out[k] = medianOf(runs.map((r) => (r as Record<string, unknown> | undefined)?.[k]));
    return out;
  }
  return first;
}
