import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * How busy the machine was, and with what: the whole machine's CPU (/proc/stat) next to the bench's own
 * (its process, the Postgres server and every backend and parallel worker of it), so a figure taken
 * while other work shared the cores says so.
 */

/** Busy and total clock ticks of all CPUs. */
function machine(): { busy: number; total: number } {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const total = f.reduce((s, x) => s + x, 0);
  return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
}

/** Clock ticks of these processes and of their children, live (their own) or ended (the parent's). */
function ours(pids: readonly number[]): number {
  let ticks = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${d}/stat`, 'utf8');
    } catch {
      continue; // ended between the listing and the read
    }
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const own = (f[11] ?? 0) + (f[12] ?? 0);
    if (pids.includes(Number(d))) ticks += own + (f[13] ?? 0) + (f[14] ?? 0);
    else if (pids.includes(f[1] ?? -1)) ticks += own;
  }
  return ticks;
}

/** Starts a window; its end gives the cores the bench used and the cores everything else used. */
export function cpuWindow(pids: readonly number[]): () => { bench_cores: number; other_cores: number } {
  const m0 = machine();
  const o0 = ours(pids);
  return () => {
    const m1 = machine();
    const o1 = ours(pids);
    const cores = availableParallelism();
    const total = (m1.total - m0.total) / cores; // ticks of one core in the window
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      bench_cores: round((o1 - o0) / total),
      other_cores: round(Math.max(0, m1.busy - m0.busy - (o1 - o0)) / total),
    };
  };
}
