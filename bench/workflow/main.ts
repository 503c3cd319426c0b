/**
 * Whole workflows through real processes, as `holt up` runs them: redis-server, the orchestrator
 * (`src/orchestrator/main.ts`) and one pup per agent (`holt pup`, as `holt up` starts it), each agent with a `/bin/sh` bid
 * script (reads the target on stdin, `exclusive` for one artefact type, `ignore` otherwise) and a
 * `/bin/sh` tool that notes the time of its first instruction and prints Holt's result JSON.
 * - Workload A: BENCH_A_GOALS goals (200) posted at once into a chain of three agents
 *   (GoalDefined → Step1 → Step2 → Done, Terminal): workflows/s until the last Done.
 * - Workload B: ten agents, the chain of three and seven that always bid `ignore`; one goal every
 *   300 ms (BENCH_B_GOALS, 100): from each artefact's created_at_ms to the first instruction of the
 *   tool it triggers, per agent.
 * Each workload reports workflows/s, latency p50/p90/p99 per agent, the CPU seconds of every process
 * (its own, and its children's: a pup's tools and bid scripts), per claim a pup saw, and RSS (idle,
 * before the goals, and at the end), and a trace of where artefact → tool time goes (trace.ts). One JSON
 * object on stdout.
 * Each workload runs BENCH_RUNS times (3); every figure is reported as its median, with the runs.
 * Run: node bench/workflow/main.ts [A|B|AB]
 * (BENCH_TRACES=jaeger: every process exports its spans over OTLP/HTTP to a local Jaeger the bench
 * starts, every trace sampled: the cost of tracing on; without it, tracing is off as by default.)
 * (BENCH_CPU_PROF=<dir>: every pup writes a V8 CPU profile there on exit; BENCH_PUP_NODE_FLAGS: more
 * node flags for the pups instead of holt up's PUP_NODE_FLAGS.)
 */
import { once } from 'node:events';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { artefactIdsSince } from '../../src/blackboard/claim-engine.ts';
import { Blackboard } from '../../src/blackboard/client.ts';
import type { Artefact } from '../../src/blackboard/types.ts';
import { PUP_NODE_FLAGS } from '../../src/local/daemon.ts';
import { type ServerProcess, spawnServer, waitReady } from '../../src/local/proc.ts';
import { startRedis } from '../../src/local/redis.ts';
import { makeTempDir, removeDir } from '../../src/local/tmp.ts';
import { newGoal, register } from '../../src/orchestrator/testkit.ts';
import { startJaeger } from '../../test/harness/jaeger.ts';
import { childrenCpu, medianOf, pct, procCpu, round, rssMb } from '../lib/proc.ts';
import { type ClaimTimes, logEvent, traceStages } from './trace.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const WHICH = (process.argv[2] ?? 'AB').toUpperCase();
const A_GOALS = Number(process.env.BENCH_A_GOALS ?? 200);
const B_GOALS = Number(process.env.BENCH_B_GOALS ?? 100);
const B_PACE_MS = 300;
/** Runs of each workload; the report gives the median of each figure (BENCH_RUNS, 3). */
const RUNS = Math.max(1, Number(process.env.BENCH_RUNS ?? 3));

/** The chain: each agent takes one type and makes the next; the last one ends the workflow. */
const CHAIN = [
  { role: 'Step1', takes: 'GoalDefined', makes: 'Step1', structural: 'Standard' },
  { role: 'Step2', takes: 'Step1', makes: 'Step2', structural: 'Standard' },
  { role: 'Step3', takes: 'Step2', makes: 'Done', structural: 'Terminal' },
];
const IDLE = Array.from({ length: 7 }, (_, i) => `Idle${i + 1}`);

const dir = makeTempDir('bench-workflow');
const script = (name: string, text: string) => {
  const f = join(dir, name);
  writeFileSync(f, text);
  chmodSync(f, 0o755);
  return f;
};
const BID = script(
  'bid.sh',
  '#!/bin/sh\n# $1: the artefact type this agent takes.\nif grep -q "\\"type\\": *\\"$1\\""; then echo exclusive; else echo ignore; fi\n',
);
const IGNORE = script('ignore.sh', '#!/bin/sh\ncat >/dev/null\necho ignore\n');
const TOOL = script(
  'tool.sh',
  '#!/bin/sh\nstart=$(date +%s%N)\ncat >/dev/null\nprintf \'{"artefact_type":"%s","artefact_payload":"%s","summary":"ok","structural_type":"%s"}\\n\' "$1" "$start" "$2"\n',
);

const redis = await startRedis();
const prof = [
  ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
  // As holt up starts a pup, unless BENCH_PUP_NODE_FLAGS says otherwise.
  ...(process.env.BENCH_PUP_NODE_FLAGS?.split(' ').filter(Boolean) ?? PUP_NODE_FLAGS),
];
const node = (s: string, extra: string[] = [], args: string[] = []) => [
  '--no-warnings=ExperimentalWarning',
  ...extra,
  join(ROOT, s),
  ...args,
];
const logHas = (p: ServerProcess, s: string) => async () => readFileSync(p.logFile, 'utf8').includes(s);

interface Agent {
  role: string;
  bid: string[];
  tool: string[];
}

/** One workload on its own instance: its processes start, run the goals, are measured and stop. */
async function workload(
  instance: string,
  agents: Agent[],
  goals: number,
  paceMs: number,
): Promise<Record<string, unknown>> {
  const bb = Blackboard.connect(redis.url, instance);
  await register(
    bb,
    agents.map((a) => a.role),
  );
  const env = { ...process.env, HOLT_INSTANCE_NAME: instance, REDIS_URL: redis.url, HOLT_HEALTH_PORT: '0' };
  const orch = spawnServer({
    name: `${instance}-orchestrator`,
    command: process.execPath,
    args: node('src/orchestrator/main.ts'),
    dir,
    cwd: ROOT,
    env: { ...env, DATABASE_URL: '', NATS_URL: '', HOLT_BID_TIMEOUT_MS: '60000' },
  });
  const pups = agents.map((a) =>
    spawnServer({
      name: `${instance}-${a.role}`,
      command: process.execPath,
      // As holt up starts it: `holt pup`.
      args: node('src/cli/main.ts', prof, ['pup']),
      dir,
      cwd: dir,
      env: {
        ...env,
        HOLT_AGENT_NAME: a.role,
        HOLT_WORKSPACE: dir,
        HOLT_AGENT_COMMAND: JSON.stringify(a.tool),
        HOLT_AGENT_BID_SCRIPT: JSON.stringify(a.bid),
      },
    }),
  );
  const all = [orch, ...pups];
  try {
    await waitReady(orch, logHas(orch, '"recovery_complete"'));
    for (const p of pups) await waitReady(p, logHas(p, '"pup_started"'));
    const idleRss = Object.fromEntries(pups.map((p, i) => [agents[i]!.role, rssMb(p.child.pid)]));
    const cpu0 = new Map(
      all.map((p) => [p, { own: procCpu(p.child.pid).all, kids: childrenCpu(p.child.pid) }]),
    );
    const redis0 = procCpu(redis.proc.child.pid).all;

    // Done artefacts heard on artefact_events: the workflows' ends.
    const sub = new Redis(redis.url);
    if (sub.status !== 'ready') await once(sub, 'ready');
    let done = 0;
    let allDone: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => {
      allDone = resolve;
    });
    // claim_granted as heard: the grant's time for the trace.
    const granted = new Map<string, number>();
    sub.on('message', (channel: string, raw: string) => {
      if (channel === bb.k.channels.workflowEvents) {
        const e = JSON.parse(raw) as { event?: string; data?: { claim_id?: string } };
        const id = e.event === 'claim_granted' ? e.data?.claim_id : undefined;
        if (id && !granted.has(id)) granted.set(id, Date.now());
      } else if (raw.includes('"type":"Done"') && ++done === goals) allDone();
    });
    await sub.subscribe(bb.k.channels.artefactEvents, bb.k.channels.workflowEvents);

    const t0 = performance.now();
    const posted: Artefact[] = [];
    for (let i = 0; i < goals; i++) {
      const g = newGoal(`goal ${i}`);
      posted.push(g);
      if (paceMs) await new Promise((r) => setTimeout(r, paceMs));
      await bb.createArtefact({ ...g, created_at_ms: Date.now() });
    }
    const limit = setTimeout(() => allDone(), 600_000);
    await finished;
    clearTimeout(limit);
    const seconds = (performance.now() - t0) / 1000;
    if (done < goals) throw new Error(`${instance}: ${done} of ${goals} workflows done after 600 s`);

    // Artefact → the first instruction of the tool it triggered, per agent that ran a tool.
    const ids = (await artefactIdsSince(bb, 0)).map((x) => x.id);
    const arts = (await bb.getArtefacts(ids)).filter((a): a is Artefact => a !== null);
    const byId = new Map(arts.map((a) => [a.id, a]));
    const latency: Record<string, number[]> = {};
    for (const a of arts) {
      const src = byId.get(a.source_artefacts[0] ?? '');
      if (a.produced_by_role === 'user' || !src) continue;
      const startedMs = Number(BigInt(a.payload) / 1_000_000n);
      const xs = latency[a.produced_by_role] ?? [];
      xs.push(startedMs - src.created_at_ms);
      latency[a.produced_by_role] = xs;
    }
    const trace = await traceOf(bb, arts, byId, granted, pups);
    const claimsSeen = goals * CHAIN.length;
    const procs = Object.fromEntries(
      all.map((p, i) => {
        const c0 = cpu0.get(p)!;
        const own = procCpu(p.child.pid).all - c0.own;
        const kids = childrenCpu(p.child.pid) - c0.kids;
        const role = i === 0 ? 'orchestrator' : agents[i - 1]!.role;
        return [
          role,
          {
            cpu_s: round(own),
            children_cpu_s: round(kids),
            ...(i > 0 ? { cpu_ms_per_claim_seen: round((own * 1000) / claimsSeen) } : {}),
            rss_mb: rssMb(p.child.pid),
          },
        ];
      }),
    );
    sub.disconnect();
    return {
      goals,
      agents: agents.length,
      seconds: round(seconds),
      workflows_per_s: round(goals / seconds),
      tool_start_latency_ms: Object.fromEntries(
        Object.entries(latency).map(([role, xs]) => [
          role,
          { n: xs.length, p50: pct(xs, 50), p90: pct(xs, 90), p99: pct(xs, 99) },
        ]),
      ),
      trace,
      processes: { ...procs, redis: { cpu_s: round(procCpu(redis.proc.child.pid).all - redis0) } },
      idle_rss_mb: idleRss,
    };
  } finally {
    await Promise.all(all.map((p) => p.stop()));
    await bb.close();
  }
}

/**
 * Where the time of artefact → tool goes, per granted claim: the claim's created_at_ms, the pups' logged
 * bid_submitted (the last), claim_granted as heard here, and the granted pup's grant_received and
 * tool_started; the tool's first instruction is its payload.
 */
async function traceOf(
  bb: Blackboard,
  arts: Artefact[],
  byId: Map<string, Artefact>,
  granted: Map<string, number>,
  pups: ServerProcess[],
): Promise<Record<string, unknown>> {
  const lastBid = new Map<string, number>();
  const first = new Map<string, number>(); // `${event} ${claim}` -> ms
  for (const p of pups) {
    for (const line of readFileSync(p.logFile, 'utf8').split('\n')) {
      const e = logEvent(line);
      if (!e) continue;
      if (e.event === 'bid_submitted') lastBid.set(e.claim, Math.max(lastBid.get(e.claim) ?? 0, e.ms));
      else if (e.event === 'grant_received' || e.event === 'tool_started') {
        const k = `${e.event} ${e.claim}`;
        if (!first.has(k)) first.set(k, e.ms);
      }
    }
  }
  // Each tool's output, with the artefact it was made from and that artefact's claim (read in two trips).
  const made = arts.flatMap((a) => {
    const src = byId.get(a.source_artefacts[0] ?? '');
    return a.produced_by_role === 'user' || !src ? [] : [{ a, src }];
  });
  const claimIds = made.length
    ? await bb.redis.mget(made.map(({ src }) => bb.k.claimByArtefact(src.id)))
    : [];
  const claims = await bb.getClaims(claimIds.filter((id): id is string => id !== null));
  const claimById = new Map(claims.flatMap((c) => (c ? [[c.claim.id, c.claim] as const] : [])));
  const times: ClaimTimes[] = [];
  for (const [i, { a, src }] of made.entries()) {
    const claimId = claimIds[i];
    const claim = claimId ? claimById.get(claimId) : undefined;
    if (!claimId || claim?.created_at_ms === undefined) continue;
    const t = {
      artefact: src.created_at_ms,
      claim: claim.created_at_ms,
      lastBid: lastBid.get(claimId),
      grant: granted.get(claimId),
      pupNotice: first.get(`grant_received ${claimId}`),
      toolStarted: first.get(`tool_started ${claimId}`),
      toolFirstInstruction: Number(BigInt(a.payload) / 1_000_000n),
    };
    if (Object.values(t).every((x) => x !== undefined)) times.push(t as ClaimTimes);
  }
  return traceStages(times);
}

// Tracing on: the spawned processes inherit the endpoint (the standard OTEL_* variable) from here.
const jaeger = process.env.BENCH_TRACES === 'jaeger' ? await startJaeger() : undefined;
if (jaeger) process.env.OTEL_EXPORTER_OTLP_ENDPOINT = jaeger.otlpHttpUrl;
else delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;

const chain: Agent[] = CHAIN.map((c) => ({
  role: c.role,
  bid: [BID, c.takes],
  tool: [TOOL, c.makes, c.structural],
}));
const out: Record<string, unknown> = {
  machine_cores: (await import('node:os')).availableParallelism(),
  runs: RUNS,
  tracing: jaeger ? 'on: OTLP/HTTP to a local Jaeger, every trace sampled' : 'off',
};
/** Each workload RUNS times (on a fresh instance each), reported as the median of every figure. */
async function runs(name: string, run: (i: number) => Promise<Record<string, unknown>>) {
  const results: Record<string, unknown>[] = [];
  for (let i = 0; i < RUNS; i++) {
    process.stderr.write(`bench/workflow: ${name} run ${i + 1} of ${RUNS}\n`);
    results.push(await run(i));
  }
  return RUNS === 1 ? results[0] : { median: medianOf(results), runs: results };
}
try {
  if (WHICH.includes('A')) out.A = await runs('A', (i) => workload(`bench-a${i}`, chain, A_GOALS, 0));
  if (WHICH.includes('B'))
    out.B = await runs('B', (i) =>
      workload(
        `bench-b${i}`,
        [...chain, ...IDLE.map((role) => ({ role, bid: [IGNORE], tool: [TOOL, 'Never', 'Standard'] }))],
        B_GOALS,
        B_PACE_MS,
      ),
    );
  // Proof the spans went somewhere: the services Jaeger heard from.
  if (jaeger) out.traced_services = await jaeger.services();
} finally {
  await redis.stop();
  await jaeger?.stop();
  removeDir(dir);
}
process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
