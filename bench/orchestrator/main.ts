/**
 * The orchestrator against N goals × M agents that bid and answer instantly through Redis, with every
 * party in its own process: redis-server, the orchestrator (`src/orchestrator/main.ts`, configured by
 * environment like `holt orchestrator`), the responders (bench/orchestrator/responders.ts, one or more
 * processes) and this process, the load generator and observer.
 * Agent 0 bids `exclusive` on goals and answers with a Terminal artefact; the others bid `ignore`,
 * so each goal is one claim: consensus over M bids, one grant, one completion.
 * Reports (one JSON object):
 * - paced: goals one at a time (the next once the previous is complete), artefact→grant latency
 *   (goal created_at_ms → claim_granted received here) without queueing;
 * - sustained: BENCH_WINDOW goals (100) in flight, the next written as one completes: claims/s and
 *   latency under a steady load, and CPU per claim;
 * - burst: all goals at once, claims/s until the last is complete, with each process's CPU seconds
 *   (every thread, and the serving thread alone: /proc/<pid>/task/<tid>/schedstat) and share of one
 *   core, Redis commands/s, and which resource saturated;
 * - saturated.bound_with_a_core_each: of the orchestrator's event loop and Redis's main thread, the
 *   one with the fewer claims per CPU second in the burst (the one that would bound throughput with a
 *   core each); bound_counting_every_thread compares the whole processes.
 * Run: node bench/orchestrator/main.ts [goals=1000] [agents=10] [responder-processes=1]
 * (BENCH_CPU_PROF=<dir> profiles the orchestrator with --cpu-prof; BENCH_NODE_FLAGS adds node flags.)
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { Blackboard } from '../../src/blackboard/client.ts';
import type { Artefact } from '../../src/blackboard/types.ts';
import { type ServerProcess, spawnServer, waitReady } from '../../src/local/proc.ts';
import { startRedis } from '../../src/local/redis.ts';
import { makeTempDir, removeDir } from '../../src/local/tmp.ts';
import { newGoal, register } from '../../src/orchestrator/testkit.ts';
import { pct, procCpu, round } from '../lib/proc.ts';

const GOALS = Number(process.argv[2] ?? 1000);
const AGENTS = Number(process.argv[3] ?? 10);
const RESPONDER_PROCS = Math.max(1, Math.min(AGENTS, Number(process.argv[4] ?? 1)));
const PACED = Math.min(300, GOALS);
/** Goals in flight during the sustained run (BENCH_WINDOW). */
const WINDOW = Math.max(1, Number(process.env.BENCH_WINDOW ?? 100));
const INSTANCE = 'bench';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** A process using at least this share of one core during the burst counts as saturated. */
const SATURATED = 0.85;

/** Busy and total jiffies of the whole host (every core, every process, the reviewer's too). */
function hostCpu(): { busy: number; total: number } {
  const v = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - (v[3] ?? 0) - (v[4] ?? 0), total };
}

function infoField(info: string, field: string): number {
  return Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(info)?.[1] ?? Number.NaN);
}

const redis = await startRedis();
const logDir = makeTempDir('bench-orchestrator');
const bb = Blackboard.connect(redis.url, INSTANCE);
const admin = new Redis(redis.url);
const sub = new Redis(redis.url);
const roles = Array.from({ length: AGENTS }, (_, i) => `agent${String(i).padStart(2, '0')}`);
await register(bb, roles);

const logHas = (p: ServerProcess, s: string) => async () => readFileSync(p.logFile, 'utf8').includes(s);
// BENCH_CPU_PROF=<dir>: the orchestrator writes a V8 CPU profile there on exit. BENCH_NODE_FLAGS: more
// flags for the orchestrator's node (--trace-gc, --import of a profiler, ...).
const prof = [
  ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
  ...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean),
];
const node = (script: string, args: string[] = [], extra: string[] = []) => [
  '--no-warnings=ExperimentalWarning',
  ...extra,
  join(ROOT, script),
  ...args,
];
const orch = spawnServer({
  name: 'orchestrator',
  command: process.execPath,
  args: node('src/orchestrator/main.ts', [], prof),
  dir: logDir,
  cwd: ROOT,
  env: {
    ...process.env,
    HOLT_INSTANCE_NAME: INSTANCE,
    REDIS_URL: redis.url,
    HOLT_HEALTH_PORT: '0',
    HOLT_RECONCILE_INTERVAL_MS: '1000',
    HOLT_LEASE_TTL_MS: '10000',
    DATABASE_URL: '',
    NATS_URL: '',
  },
});
const responders: ServerProcess[] = [];
let failed = false;

// What the observer hears: the first claim_granted per claim (stamped on arrival, wall clock like
// created_at_ms), each goal's claim, and completions.
const grantedAt = new Map<string, number>();
const claimOf = new Map<string, string>();
const completed = new Set<string>();
const waiters = new Map<string, () => void>();
const wfChannel = bb.k.channels.workflowEvents;
sub.on('message', (channel: string, raw: string) => {
  if (channel === wfChannel) {
    if (!raw.includes('"claim_granted"')) return; // bid_submitted is most of the traffic
    const ev = JSON.parse(raw) as { event: string; data: { claim_id: string } };
    if (ev.event === 'claim_granted' && !grantedAt.has(ev.data.claim_id))
      grantedAt.set(ev.data.claim_id, Date.now());
    return;
  }
  const c = JSON.parse(raw) as { id: string; artefact_id: string; status: string };
  claimOf.set(c.artefact_id, c.id);
  if (c.status === 'complete' && !completed.has(c.artefact_id)) {
    completed.add(c.artefact_id);
    waiters.get(c.artefact_id)?.();
  }
});
// Only once ready: a SUBSCRIBE sent while ioredis's ready check (INFO) is still in flight puts the
// connection in subscriber mode under it, the check fails and the connection is dropped and
// re-made, losing the subscription (seen here as a goal whose completion was never heard).
if (sub.status !== 'ready') await once(sub, 'ready');
await sub.subscribe(wfChannel, bb.k.channels.claimUpdates);

function whenComplete(ids: string[], limitMs: number): Promise<void> {
  const left = new Set(ids.filter((id) => !completed.has(id)));
  if (!left.size) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      for (const id of left) waiters.delete(id);
      // Which side lost it: the stored claims of a few of the goals not heard of as complete.
      void Promise.all(
        [...left].slice(0, 5).map(async (id) => {
          const claim = await admin.get(bb.k.claimByArtefact(id));
          const status = claim ? await admin.hget(bb.k.claim(claim), 'status') : null;
          return `${id}: claim ${claim ?? 'none'} ${status ?? ''}`;
        }),
      ).then((seen) =>
        reject(
          new Error(
            `${left.size} of ${ids.length} goals not complete after ${limitMs} ms (${seen.join('; ')})`,
          ),
        ),
      );
    }, limitMs);
    for (const id of left)
      waiters.set(id, () => {
        waiters.delete(id);
        left.delete(id);
        if (!left.size) {
          clearTimeout(t);
          resolve();
        }
      });
  });
}

/** Runs `goals` with at most `window` in flight: each completion writes the next goal. */
function windowed(goals: Artefact[], window: number, limitMs: number): Promise<void> {
  let next = 0;
  let left = goals.length;
  return new Promise((resolve, reject) => {
    const t = setTimeout(
      () => reject(new Error(`${left} of ${goals.length} goals not complete after ${limitMs} ms`)),
      limitMs,
    );
    const start = () => {
      const g = goals[next++];
      if (!g) return;
      g.created_at_ms = Date.now();
      waiters.set(g.id, () => {
        waiters.delete(g.id);
        if (--left === 0) {
          clearTimeout(t);
          resolve();
        } else start();
      });
      bb.createArtefact(g).catch(reject);
    };
    for (let i = 0; i < window; i++) start();
  });
}

const latencies = (goals: Artefact[]) =>
  goals.map((g) => (grantedAt.get(claimOf.get(g.id) ?? '') ?? Number.NaN) - g.created_at_ms);

interface Snapshot {
  t: number;
  cpu: {
    orchestrator: number;
    orchestrator_event_loop: number;
    redis_server: number;
    redis_main_thread: number;
    responders: number;
    load_generator: number;
  };
  host: { busy: number; total: number };
}
function snapshot(): Snapshot {
  const o = procCpu(orch.child.pid);
  const r = procCpu(redis.proc.child.pid);
  return {
    t: performance.now(),
    cpu: {
      orchestrator: o.all,
      orchestrator_event_loop: o.main,
      redis_server: r.all,
      redis_main_thread: r.main,
      responders: responders.reduce((s, p) => s + procCpu(p.child.pid).all, 0),
      load_generator: procCpu(process.pid).all,
    },
    host: hostCpu(),
  };
}
function usage(a: Snapshot, b: Snapshot) {
  const seconds = (b.t - a.t) / 1000;
  const keys = Object.keys(a.cpu) as (keyof Snapshot['cpu'])[];
  const cpu_s = Object.fromEntries(keys.map((k) => [k, round(b.cpu[k] - a.cpu[k], 3)]));
  const core_share = Object.fromEntries(keys.map((k) => [k, round((b.cpu[k] - a.cpu[k]) / seconds)]));
  const cores = availableParallelism();
  const host_busy_cores = round(((b.host.busy - a.host.busy) / (b.host.total - a.host.total)) * cores);
  return { seconds, cpu_s, core_share, host_busy_cores, cores };
}

/**
 * The burst rate each process would allow with a core to itself (claims per CPU second); the lowest is
 * the bound on a host with enough cores, whatever else shared this one.
 */
function ceilings(u: ReturnType<typeof usage>, claims: number) {
  const c = Object.fromEntries(Object.entries(u.cpu_s).map(([k, v]) => [k, Math.round(claims / v)]));
  // The bound that matters is between the two parts of the system: the orchestrator and Redis. The
  // responders stand in for agents (pods of their own in a cluster) and the load generator is the bench.
  // Each serves on one thread (Node's event loop, Redis's main thread): the first of those two to fill
  // its core is the bound. The whole-process figure counts V8's helper threads too, which need CPU
  // beside the event loop (what an orchestrator pod must be given), but do not hold it up.
  const lower = (a: string, b: string) => ((c[a] ?? 0) < (c[b] ?? 0) ? 'orchestrator' : 'redis_server');
  return {
    claims_per_cpu_second: c,
    bound_with_a_core_each: lower('orchestrator_event_loop', 'redis_main_thread'),
    bound_counting_every_thread: lower('orchestrator', 'redis_server'),
  };
}

/** Which resource bounded the burst: a process at a full core, else the host's cores, else none. */
function verdict(u: ReturnType<typeof usage>) {
  const [top, share] = Object.entries(u.core_share).sort((a, b) => b[1] - a[1])[0] ?? ['none', 0];
  if (share >= SATURATED)
    return {
      resource: top === 'redis_server' ? 'redis-server CPU' : `${top} CPU`,
      why: `${top} used ${share} of one core (single-threaded event loop), the most of any process`,
    };
  if (u.host_busy_cores >= 0.9 * u.cores)
    return {
      resource: 'host CPU',
      why: `no process at a full core (top: ${top} at ${share}), but the host's ${u.cores} cores were ${u.host_busy_cores} busy (all processes, other tenants included)`,
    };
  return {
    resource: 'none (round-trip latency)',
    why: `no process at a full core (top: ${top} at ${share}) and the host not full (${u.host_busy_cores} of ${u.cores} cores busy)`,
  };
}

try {
  await waitReady(orch, logHas(orch, '"recovery_complete"'));
  for (let i = 0; i < RESPONDER_PROCS; i++) {
    const mine = roles.filter((_, j) => j % RESPONDER_PROCS === i);
    const p = spawnServer({
      name: `responders${i}`,
      command: process.execPath,
      args: node('bench/orchestrator/responders.ts', [redis.url, INSTANCE, ...mine]),
      dir: logDir,
      cwd: ROOT,
    });
    responders.push(p);
  }
  for (const p of responders) await waitReady(p, logHas(p, 'responders_ready'));

  // Paced: one goal at a time, the next once the previous is complete (latency without queueing).
  const paced: Artefact[] = [];
  await admin.config('RESETSTAT');
  const p0 = snapshot();
  for (let i = 0; i < PACED; i++) {
    const g = newGoal(`paced ${i}`, { created_at_ms: Date.now() });
    paced.push(g);
    await bb.createArtefact(g);
    await whenComplete([g.id], 10_000);
  }
  const pacedUse = usage(p0, snapshot());
  const pacedCommands = infoField(await admin.info('stats'), 'total_commands_processed');
  const pacedSmembers = Number(
    /^cmdstat_smembers:calls=(\d+)/m.exec(await admin.info('commandstats'))?.[1] ?? 0,
  );
  const pacedLat = latencies(paced);

  // Sustained: WINDOW goals in flight, the next written as one completes (a steady load, no backlog).
  const steady = Array.from({ length: GOALS }, (_, i) => newGoal(`steady ${i}`));
  await admin.config('RESETSTAT');
  const s0 = snapshot();
  await windowed(steady, WINDOW, 120_000);
  const steadyUse = usage(s0, snapshot());
  const steadyCommands = infoField(await admin.info('stats'), 'total_commands_processed');
  const steadyLat = latencies(steady);

  // Burst: every goal at once; claims/s until the last claim is complete.
  const burst = Array.from({ length: GOALS }, (_, i) => newGoal(`burst ${i}`));
  await admin.config('RESETSTAT');
  let peakOps = 0;
  const sampler = setInterval(() => {
    admin
      .info('stats')
      .then((s) => {
        peakOps = Math.max(peakOps, infoField(s, 'instantaneous_ops_per_sec'));
      })
      .catch(() => undefined);
  }, 200);
  const b0 = snapshot();
  const now = Date.now();
  for (const g of burst) g.created_at_ms = now;
  const done = whenComplete(
    burst.map((g) => g.id),
    90_000,
  );
  for (let i = 0; i < burst.length; i += 200) {
    await Promise.all(burst.slice(i, i + 200).map((g) => bb.createArtefact(g)));
  }
  await done;
  const burstUse = usage(b0, snapshot());
  clearInterval(sampler);
  const commands = infoField(await admin.info('stats'), 'total_commands_processed');
  const cmdstats = await admin.info('commandstats');
  const top = [...cmdstats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)]
    .map((m) => [m[1] ?? '', Number(m[2])] as const)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8);
  const burstLat = latencies(burst);
  const ceiling = ceilings(burstUse, GOALS);
  const perClaim = (u: ReturnType<typeof usage>, n: number) =>
    Object.fromEntries(Object.entries(u.cpu_s).map(([k, v]) => [k, round((v * 1000) / n, 3)]));

  console.log(
    JSON.stringify({
      bench: 'orchestrator',
      goals: GOALS,
      agents: AGENTS,
      processes: {
        orchestrator: 'node src/orchestrator/main.ts (env config, info logs to a file)',
        redis_server: 1,
        responders: RESPONDER_PROCS,
        load_generator: 'this process (writes goals, hears grants and completions)',
      },
      burst: {
        claims_per_second: round(GOALS / burstUse.seconds, 1),
        seconds: round(burstUse.seconds),
        artefact_to_grant_ms: { p50: pct(burstLat, 50), p99: pct(burstLat, 99) },
        cpu_s: burstUse.cpu_s,
        core_share: burstUse.core_share,
        cpu_ms_per_claim: perClaim(burstUse, GOALS),
        host_busy_cores: burstUse.host_busy_cores,
        host_cores: burstUse.cores,
        redis: {
          ops_per_second: Math.round(commands / burstUse.seconds),
          peak_instantaneous_ops_per_sec: peakOps,
          commands_per_claim: round(commands / GOALS, 1),
          top_commands_per_claim: Object.fromEntries(top.map(([c, n]) => [c, round(n / GOALS, 1)])),
        },
      },
      sustained: {
        window: WINDOW,
        claims_per_second: round(GOALS / steadyUse.seconds, 1),
        seconds: round(steadyUse.seconds),
        artefact_to_grant_ms: { p50: pct(steadyLat, 50), p99: pct(steadyLat, 99) },
        cpu_ms_per_claim: perClaim(steadyUse, GOALS),
        core_share: steadyUse.core_share,
        host_busy_cores: steadyUse.host_busy_cores,
        redis_commands_per_claim: round(steadyCommands / GOALS, 1),
      },
      paced: {
        goals: PACED,
        artefact_to_grant_ms: {
          p50: pct(pacedLat, 50),
          p90: pct(pacedLat, 90),
          p99: pct(pacedLat, 99),
          max: pct(pacedLat, 100),
        },
        cpu_ms_per_claim: perClaim(pacedUse, PACED),
        redis_commands_per_claim: round(pacedCommands / PACED, 1),
        // The orchestrator reads a claim's outputs (one SMEMBERS) once per decision step.
        orchestrator_steps_per_claim: round(pacedSmembers / PACED, 1),
      },
      saturated: { ...verdict(burstUse), ...ceiling },
      target: {
        paced_p99_under_10ms: pct(pacedLat, 99) < 10,
        orchestrator_not_the_bound: ceiling.bound_with_a_core_each === 'redis_server',
        orchestrator_not_the_bound_counting_every_thread:
          ceiling.bound_counting_every_thread === 'redis_server',
      },
    }),
  );
} catch (e) {
  failed = true;
  for (const p of [orch, ...responders]) process.stderr.write(`--- ${p.name} log tail:\n${p.tail(30)}\n`);
  throw e;
} finally {
  await Promise.all([orch.stop(), ...responders.map((p) => p.stop())]);
  sub.disconnect();
  admin.disconnect();
  await bb.close();
  await redis.stop();
  if (!failed) removeDir(logDir);
}
