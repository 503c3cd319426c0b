import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { Blackboard } from '../../src/blackboard/client.ts';
import { type ServerProcess, spawnServer } from '../../src/local/proc.ts';
import { type RedisServer, startRedis } from '../../src/local/redis.ts';
import { makeTempDir, removeDir } from '../../src/local/tmp.ts';
import { newGoal, register } from '../../src/orchestrator/testkit.ts';

/**
 * The fault drills' world: a real Redis, the real orchestrator and real pups as processes (the same
 * programs `holt up` runs), a workload of two-step workflows (goal → Code → Terminal, both steps by one
 * command-tool agent), and an observer that counts what the invariants need: every workflow finished,
 * no claim granted twice, no output written twice. Used by the CI-sized tests (test/drills) and by the
 * full-sized bench (bench/drills).
 */

const ROOT = join(import.meta.dirname, '..', '..');
const ROLE = 'Coder';
const INSTANCE = 'drill';

/** The agent's tool: a Code for a goal, a Terminal for a Code; a short sleep widens the kill window. */
const TOOL = `input=$(cat)
sleep 0.1
case "$input" in
  *'"payload":"drill-code"'*) echo '{"artefact_type":"Done","artefact_payload":"done","summary":"s","structural_type":"Terminal"}' ;;
  *) echo '{"artefact_type":"Code","artefact_payload":"drill-code","summary":"s"}' ;;
esac`;

export interface DrillResult {
  drill: string;
  workflows: number;
  finished: number;
  /** Workflows not finished when the drill gave up waiting. */
  lost: number;
  /** Claims granted twice plus outputs written twice (both must be 0). */
  duplicated: number;
  kills: number;
  /** Kill → the restarted process ready again (ms). */
  recover_p50_ms: number;
  recover_max_ms: number;
  seconds: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0);
};

/** A seeded stream of numbers in [0, 1) (mulberry32): the same drill kills at the same moments. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A supervised program: started, killed with SIGKILL, started again; each start waits for its log line. */
class Program {
  proc: ServerProcess | undefined;
  private starts = 0;
  private readonly name: string;
  private readonly dir: string;
  private readonly script: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly readyLine: string;
  constructor(name: string, dir: string, script: string, env: NodeJS.ProcessEnv, readyLine: string) {
    this.name = name;
    this.dir = dir;
    this.script = script;
    this.env = env;
    this.readyLine = readyLine;
  }

  async start(): Promise<void> {
    this.starts++;
    const proc = spawnServer({
      name: `${this.name}-${this.starts}`,
      command: process.execPath,
      args: ['--no-warnings=ExperimentalWarning', join(ROOT, this.script)],
      dir: this.dir,
      cwd: ROOT,
      env: { ...process.env, ...this.env },
    });
    this.proc = proc;
    const deadline = Date.now() + 60_000; // only stops a broken drill from hanging
    while (!readFileSync(proc.logFile, 'utf8').includes(this.readyLine)) {
      if (proc.child.exitCode !== null) throw new Error(`${this.name} exited:\n${proc.tail()}`);
      if (Date.now() > deadline) throw new Error(`${this.name} not ready:\n${proc.tail()}`);
      await sleep(20);
    }
  }

  /** SIGKILL, as a crash or the OOM killer would: no cleanup, no lease release. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p) return;
    p.child.kill('SIGKILL');
    if (p.child.exitCode === null && p.child.signalCode === null)
      await new Promise((r) => p.child.once('exit', r));
  }

  async stop(): Promise<void> {
    await this.proc?.stop(2000);
  }
}

export interface World {
  redis: RedisServer;
  bb: Blackboard;
  orchestrator: Program;
  pup: Program;
  /** Posts `n` goals; returns their ids. */
  post(n: number): Promise<string[]>;
  /** Waits (up to `limitMs`) for the goals' workflows to finish; returns what the invariants say. */
  settle(goals: string[], limitMs: number): Promise<{ finished: number; duplicated: number }>;
  close(): Promise<void>;
}

export async function startWorld(): Promise<World> {
  const dir = makeTempDir('drill');
  const redis = await startRedis({ aof: 'everysec' });
  const bb = Blackboard.connect(redis.url, INSTANCE);
  await register(bb, [ROLE]);
  const tool = join(dir, 'tool.sh');
  writeFileSync(tool, TOOL, { mode: 0o755 });
  // Every claim_granted, heard by a subscriber of our own.
  const sub = new Redis(redis.url);
  const grants = new Map<string, number>();
  sub.on('message', (_c: string, raw: string) => {
    const m = JSON.parse(raw) as { event?: string; data?: { claim_id?: string; agent_name?: string } };
    if (m.event !== 'claim_granted') return;
    const k = `${m.data?.claim_id}/${m.data?.agent_name}`;
    grants.set(k, (grants.get(k) ?? 0) + 1);
  });
  await sub.subscribe(bb.k.channels.workflowEvents);
  const orchestrator = new Program(
    'orchestrator',
    dir,
    'src/orchestrator/main.ts',
    {
      HOLT_INSTANCE_NAME: INSTANCE,
      REDIS_URL: redis.url,
      HOLT_HEALTH_PORT: '0',
      // A killed leader's lease runs out fast, so a drill of many kills stays short.
      HOLT_LEASE_TTL_MS: '1500',
      HOLT_STANDBY_POLL_MS: '100',
      HOLT_RECONCILE_INTERVAL_MS: '250',
      HOLT_REDISPATCH_AFTER_MS: '3000',
      HOLT_BID_TIMEOUT_MS: '10000',
      DATABASE_URL: '',
      NATS_URL: '',
    },
    '"event_type":"recovery_complete"',
  );
  const pup = new Program(
    'pup',
    dir,
    'src/pup/main.ts',
    {
      HOLT_INSTANCE_NAME: INSTANCE,
      HOLT_AGENT_NAME: ROLE,
      REDIS_URL: redis.url,
      HOLT_AGENT_COMMAND: JSON.stringify(['/bin/sh', tool]),
      HOLT_BIDDING_STRATEGY: 'exclusive',
      HOLT_HEALTH_PORT: '0',
      HOLT_WORKSPACE: dir,
      HOLT_RESCAN_INTERVAL_MS: '500',
      HOLT_SHUTDOWN_GRACE_MS: '0',
      // A killed pup's execution lease runs out fast (it is renewed while a run lasts).
      HOLT_EXECUTION_LEASE_MS: '1500',
    },
    '"event_type":"pup_started"',
  );
  await Promise.all([orchestrator.start(), pup.start()]);

  return {
    redis,
    bb,
    orchestrator,
    pup,
    async post(n) {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const g = newGoal('drill-goal', { id: randomUUID() });
        await bb.createArtefact(g);
        ids.push(g.id);
      }
      return ids;
    },
    async settle(goals, limitMs) {
      const deadline = Date.now() + limitMs;
      let finished = 0;
      let outputsTwice = 0;
      for (;;) {
        finished = 0;
        outputsTwice = 0;
        for (const g of goals) {
          const codes = await bb.getArtefacts(await bb.childrenOf(g));
          const code = codes.filter((a) => a?.produced_by_role === ROLE);
          if (code.length > 1) outputsTwice++;
          const c = code[0];
          if (!c) continue;
          const ends = (await bb.getArtefacts(await bb.childrenOf(c.id))).filter(
            (a) => a?.produced_by_role === ROLE,
          );
          if (ends.length > 1) outputsTwice++;
          if (ends.some((a) => a?.structural_type === 'Terminal')) finished++;
        }
        if (finished === goals.length || Date.now() > deadline) break;
        await sleep(200);
      }
      const grantedTwice = [...grants.values()].filter((n) => n > 1).length;
      return { finished, duplicated: grantedTwice + outputsTwice };
    },
    async close() {
      await Promise.all([orchestrator.stop(), pup.stop()]);
      sub.disconnect();
      await bb.close();
      await redis.stop();
      removeDir(dir);
    },
  };
}

/**
 * Runs `workflows` workflows while `victim` is killed with SIGKILL `kills` times, at seeded random
 * moments 100–600 ms apart, and started again at once each time. Reports the invariants and how
 * long each restart took to be ready (for the orchestrator: until it leads and has recovered).
 */
export async function killDrill(
  drill: string,
  victim: 'orchestrator' | 'pup',
  o: { workflows: number; kills: number; seed?: number; limitMs?: number },
): Promise<DrillResult> {
  const t0 = Date.now();
  const w = await startWorld();
  try {
    const rnd = seeded(o.seed ?? 1);
    const goals = await w.post(o.workflows);
    const recover: number[] = [];
    let kills = 0;
    for (; kills < o.kills; kills++) {
      await sleep(100 + Math.floor(rnd() * 500));
      const p = w[victim];
      const t = Date.now();
      await p.kill();
      await p.start();
      recover.push(Date.now() - t);
    }
    const s = await w.settle(goals, o.limitMs ?? 120_000);
    return {
      drill,
      workflows: goals.length,
      finished: s.finished,
      lost: goals.length - s.finished,
      duplicated: s.duplicated,
      kills,
      recover_p50_ms: pct(recover, 50),
      recover_max_ms: pct(recover, 100),
      seconds: Math.round((Date.now() - t0) / 100) / 10,
    };
  } finally {
    await w.close();
  }
}
