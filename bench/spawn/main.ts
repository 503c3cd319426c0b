/**
 * What a bid script costs to start, two ways, from a Node process the size of a pup:
 * - `node`: the pup's own `runProcess` (src/pup/process.ts: spawn, three pipes, its own process group);
 * - `resident_sh`: a resident `/bin/sh` the pup would write one line to per run, which starts the
 *   script with its stdin, stdout and stderr in files (synchronous file I/O in the pup: the asynchronous
 *   kind costs as much as the spawn it replaces).
 * Both run the same `/bin/sh -c` script workload A's bid scripts run. Figures are CPU ms per run: the
 * pup's own, and everything else (the script, and the resident shell's forks).
 * Run: node bench/spawn/main.ts [runs=300] [pup-rss-mb=115]   (prints one JSON object)
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runProcess } from '../../src/pup/process.ts';
import { childrenCpu, procCpu, round, rssMb } from '../lib/proc.ts';

const RUNS = Number(process.argv[2] ?? 300);
const RSS_MB = Number(process.argv[3] ?? 115);
const SCRIPT = 'read x; case "$x" in *Step1*) echo exclusive;; *) echo ignore;; esac';
const TARGET = `${JSON.stringify({ id: 'a1', type: 'GoalDefined', payload: 'p'.repeat(200) })}\n`;

// A process the size of a pup under `holt up` (about 115 MB), so fork copies as many page tables.
const ballast: string[][] = [];
while (rssMb(process.pid) < RSS_MB)
  ballast.push(Array.from({ length: 20_000 }, (_, j) => `${ballast.length}:${j}`));

const ownMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function measure(run: () => Promise<string>, otherMs: () => number) {
  if ((await run()).trim() !== 'ignore') throw new Error('the script did not answer ignore');
  const own = ownMs();
  const other = otherMs();
  const wall = performance.now();
  for (let i = 0; i < RUNS; i++) await run();
  return {
    own_cpu_ms: round((ownMs() - own) / RUNS, 3),
    other_cpu_ms: round((otherMs() - other) / RUNS, 3),
    wall_ms: round((performance.now() - wall) / RUNS, 3),
  };
}

const viaNode = () =>
  runProcess({
    argv: ['/bin/sh', '-c', SCRIPT],
    cwd: tmpdir(),
    stdin: TARGET,
    timeoutMs: 10_000,
    maxBytes: 64 * 1024,
  }).then((r) => r.stdout);

/** The prototype: one line per run names a directory holding `run` (the command) and `in`. */
function residentShell(dir: string) {
  const loop = `while IFS= read -r id; do
  d="$SPAWN_DIR/$id"
  { ( . "$d/run" ) & wait $!; echo "$id $?"; } &
done`;
  const sh: ChildProcessWithoutNullStreams = spawn('/bin/sh', ['-c', loop], {
    env: { PATH: process.env.PATH, SPAWN_DIR: dir },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const waiting = new Map<string, () => void>();
  let buf = '';
  sh.stdout.on('data', (b: Buffer) => {
    buf += b.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const id = buf.slice(0, i).split(' ')[0] as string;
      buf = buf.slice(i + 1);
      waiting.get(id)?.();
    }
  });
  let seq = 0;
  const run = async () => {
    const id = String(seq++ % 4);
    const d = join(dir, id);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, 'in'), TARGET);
    writeFileSync(join(d, 'run'), `exec /bin/sh -c '${SCRIPT}' <"${d}/in" >"${d}/out" 2>"${d}/err"\n`);
    await new Promise<void>((resolve) => {
      waiting.set(id, resolve);
      sh.stdin.write(`${id}\n`);
    });
    readFileSync(join(d, 'err'), 'utf8');
    return readFileSync(join(d, 'out'), 'utf8');
  };
  const cpuMs = () => (procCpu(sh.pid).all + childrenCpu(sh.pid)) * 1000;
  return { run, cpuMs, stop: () => sh.stdin.end() };
}

const node = await measure(viaNode, () => childrenCpu(process.pid) * 1000);
const dir = mkdtempSync(join(tmpdir(), 'holt-bench-spawn-'));
const shell = residentShell(dir);
const resident = await measure(shell.run, shell.cpuMs);
shell.stop();
rmSync(dir, { recursive: true, force: true });
const total = (x: typeof node) => round(x.own_cpu_ms + x.other_cpu_ms, 3);
console.log(
  JSON.stringify(
    {
      runs: RUNS,
      parent_rss_mb: rssMb(process.pid),
      node,
      resident_sh: resident,
      saved_per_run_ms: {
        pup_own: round(node.own_cpu_ms - resident.own_cpu_ms, 3),
        machine: round(total(node) - total(resident), 3),
      },
    },
    null,
    2,
  ),
);
