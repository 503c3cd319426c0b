/**
 * The orchestrator against N goals × M agents that bid and answer instantly through Redis.
 * Agent 0 bids `exclusive` on goals and answers with a Terminal artefact; the others bid `ignore`,
 * so each goal is one claim: consensus over M bids, one grant, one completion.
 * Reports (one JSON object): throughput with all goals submitted at once (claims/s), and
 * artefact→grant latency (goal created_at_ms → claim_granted received) with goals paced one by one.
 * Run: node bench/orchestrator/main.ts [goals=1000] [agents=10]
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { Blackboard } from '../../src/blackboard/client.ts';
import type { Artefact } from '../../src/blackboard/types.ts';
import {
  newGoal,
  register,
  ScriptedAgent,
  startOrchestrator,
  waitFor,
} from '../../src/orchestrator/testkit.ts';
import { startRedis } from '../../test/harness/redis.ts';

const GOALS = Number(process.argv[2] ?? 1000);
const AGENTS = Number(process.argv[3] ?? 10);
const PACED = Math.min(300, GOALS);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return Number((s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0).toFixed(2));
}

const redis = await startRedis();
const instance = 'bench';
const bb = Blackboard.connect(redis.url, instance);
const roles = Array.from({ length: AGENTS }, (_, i) => `agent${String(i).padStart(2, '0')}`);
await register(bb, roles);
const agents = await Promise.all(
  roles.map((role, i) =>
    ScriptedAgent.start(redis.url, instance, {
      role,
      bid: (a: Artefact) => (i === 0 && a.type === 'GoalDefined' ? 'exclusive' : 'ignore'),
      respond: () => ({ structural_type: 'Terminal', type: 'Done', payload: 'ok' }),
    }),
  ),
);
// First claim_granted per claim, stamped on arrival (wall clock, like created_at_ms).
const granted = new Map<string, number>();
const sub = new Redis(redis.url);
sub.on('message', (_c: string, raw: string) => {
  const ev = JSON.parse(raw) as { event: string; data: { claim_id: string } };
  if (ev.event === 'claim_granted' && !granted.has(ev.data.claim_id))
    granted.set(ev.data.claim_id, Date.now());
});
await sub.subscribe(bb.k.channels.workflowEvents);
const orch = startOrchestrator(redis.url, instance, {
  reconcileIntervalMs: 1000,
  bidPollMs: 100,
  leaseTtlMs: 10_000,
});
await orch.whenLeader();

async function allComplete(goals: Artefact[]): Promise<boolean> {
  const ids = await bb.claimIdsForArtefacts(goals.map((g) => g.id));
  if (ids.some((id) => !id)) return false;
  const claims = await bb.getClaims(ids as string[]);
  return claims.every((c) => c?.claim.status === 'complete');
}

async function latencies(goals: Artefact[]): Promise<number[]> {
  const ids = await bb.claimIdsForArtefacts(goals.map((g) => g.id));
  return goals.map((g, i) => (granted.get(ids[i] as string) ?? Number.NaN) - g.created_at_ms);
}

try {
  // Paced: one goal at a time, the next once the previous is complete (latency without queueing).
  const paced: Artefact[] = [];
  for (let i = 0; i < PACED; i++) {
    const g = newGoal(`paced ${i}`, { created_at_ms: Date.now() });
    paced.push(g);
    await bb.createArtefact(g);
    await waitFor(() => allComplete([g]), 'paced goal', 60_000);
  }
  const pacedLat = await latencies(paced);

  // Burst: every goal at once; claims/s until the last claim is complete.
  const burst = Array.from({ length: GOALS }, (_, i) => newGoal(`burst ${i}`));
  const t0 = performance.now();
  const now = Date.now();
  for (let i = 0; i < burst.length; i += 200) {
    await Promise.all(burst.slice(i, i + 200).map((g) => bb.createArtefact({ ...g, created_at_ms: now })));
  }
  for (const g of burst) g.created_at_ms = now;
  await waitFor(() => allComplete(burst), 'burst complete', 600_000);
  const seconds = (performance.now() - t0) / 1000;
  const burstLat = await latencies(burst);
  const cpu = process.cpuUsage();

  console.log(
    JSON.stringify({
      bench: 'orchestrator',
      goals: GOALS,
      agents: AGENTS,
      burst: {
        claims_per_second: Number((GOALS / seconds).toFixed(1)),
        seconds: Number(seconds.toFixed(2)),
        artefact_to_grant_ms: { p50: pct(burstLat, 50), p99: pct(burstLat, 99) },
      },
      paced: {
        goals: PACED,
        artefact_to_grant_ms: {
          p50: pct(pacedLat, 50),
          p90: pct(pacedLat, 90),
          p99: pct(pacedLat, 99),
          max: pct(pacedLat, 100),
        },
      },
      note: 'one process runs the orchestrator, the agents and the load generator; cpu_s covers all three',
      process_cpu_s: Number(((cpu.user + cpu.system) / 1e6).toFixed(2)),
    }),
  );
} finally {
  await orch.stop();
  for (const a of agents) await a.stop();
  sub.disconnect();
  await bb.close();
  await redis.stop();
}
