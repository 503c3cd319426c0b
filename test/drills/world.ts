import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { childrenOf } from '../../src/blackboard/claim-engine.ts';
import { Blackboard } from '../../src/blackboard/client.ts';
import { outputId } from '../../src/blackboard/grants.ts';
import { createPool } from '../../src/common/pg.ts';
import { seeded } from '../../src/common/seeded.ts';
import { type NatsServer, startNats } from '../../src/local/nats.ts';
import { freePort } from '../../src/local/ports.ts';
import { type PostgresServer, startPostgres } from '../../src/local/postgres.ts';
import { type ServerProcess, spawnServer } from '../../src/local/proc.ts';
import { type RedisServer, startRedis } from '../../src/local/redis.ts';
import { makeTempDir, removeDir } from '../../src/local/tmp.ts';
import { newGoal, register } from '../../src/orchestrator/testkit.ts';
import { countRuns, type ProcessRecord, type RunCount, readRuns } from './runs.ts';

/**
 * The fault drills' world: a real Redis, the real orchestrator and real pups as processes (the same
 * programs `holt up` runs), a workload of two-step workflows (goal → Code → Terminal, both steps by one
 * command-tool agent), and an observer that counts what the invariants need: every workflow finished,
 * no claim granted twice, no output written twice, no tool run twice beyond the by-design windows
 * (every run is logged by the tool itself and classified in runs.ts). Used by the CI-sized tests (test/drills) and by the
 * full-sized bench (bench/drills).
 */

const ROOT = join(import.meta.dirname, '..', '..');
const ROLE = 'Coder';
const INSTANCE = 'drill';

/**
 * The agent's tool: a Code for a goal, a Terminal for a Code; a short sleep widens the kill window.
 * Each run first appends its HOLT_CALL_ID (one per claim and role) and its parent, the pup, to RUNS.
 */
const tool = (runs: string) => `echo "$HOLT_CALL_ID $PPID" >> '${runs}'
input=$(cat)
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
  /** Claims granted twice, outputs written twice and unexpected tool runs (all must be 0). */
  duplicated: number;
  /** Every tool run, per (claim, role): repeats by design (with their reasons) apart from unexpected ones. */
  runs: number;
  dupRunsByDesign: number;
  byDesign: RunCount['byDesign'];
  dupRunsUnexpected: number;
  unexpected: RunCount['unexpected'];
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

/** A drill's figures from what it saw: the settled workflows, its kills and each recovery (ms). */
function resultOf(
  drill: string,
  goals: string[],
  s: Settled,
  kills: number,
  recover: number[],
  t0: number,
): DrillResult {
  return {
    drill,
    workflows: goals.length,
    finished: s.finished,
    lost: goals.length - s.finished,
    duplicated: s.duplicated,
    runs: s.runs.runs,
    dupRunsByDesign: s.runs.dupRunsByDesign,
    byDesign: s.runs.byDesign,
    dupRunsUnexpected: s.runs.dupRunsUnexpected,
    unexpected: s.runs.unexpected,
    kills,
    recover_p50_ms: pct(recover, 50),
    recover_max_ms: pct(recover, 100),
    seconds: Math.round((Date.now() - t0) / 100) / 10,
  };
}

export { seeded };

/** A supervised program: started, killed with SIGKILL, started again; each start waits for its log line. */
class Program {
  proc: ServerProcess | undefined;
  /** Every process this program started: the tool runs' parents. */
  readonly history: ProcessRecord[] = [];
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
    this.history.push({
      pid: proc.child.pid ?? -1,
      logFile: proc.logFile,
      killed: false,
      worker: this.env.HOLT_MODE === 'worker',
    });
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
    const h = this.history.find((x) => x.pid === p.child.pid);
    if (h) h.killed = true;
    if (p.child.exitCode === null && p.child.signalCode === null)
      await new Promise((r) => p.child.once('exit', r));
  }

  async stop(): Promise<void> {
    await this.proc?.stop(2000);
  }
}

export interface World {
  redis: RedisServer;
  /** With `scalable`: the inbox's stores, and the role's controller (bids) beside `pup` (its worker). */
  nats?: NatsServer;
  postgres?: { server: PostgresServer; restart(downMs: number): Promise<void> };
  controller?: Program;
  bb: Blackboard;
  orchestrator: Program;
  pup: Program;
  /** The orchestrator's probe port (/healthz, /readyz). */
  healthPort: number;
  /** grant_reopened events heard. */
  reopened(): number;
  /** Posts `n` goals; returns their ids. */
  post(n: number): Promise<string[]>;
  /** Waits (up to `limitMs`) for the goals' workflows to finish; returns what the invariants say. */
  settle(goals: string[], limitMs: number): Promise<Settled>;
  close(): Promise<void>;
}

export interface Settled {
  finished: number;
  duplicated: number;
  runs: RunCount;
}

export interface WorldOptions {
  /** The role runs on an inbox worker (Postgres + NATS), bid for by a controller pup. */
  scalable?: boolean;
  /** Redis without AOF: a restart loads the last SAVE (a restore from an older snapshot). */
  snapshotOnly?: boolean;
  /**
   * Count a grant announced again as a duplicate (default true). The loss drill turns it off: a lost
   * grant is announced again by design; what it must not do is run a tool twice unexplained, and tool
   * runs are counted in every drill.
   */
  countGrants?: boolean;
}

export async function startWorld(o: WorldOptions = {}): Promise<World> {
  const dir = makeTempDir('drill');
  const redis = await startRedis({ aof: o.snapshotOnly ? false : 'everysec' });
  const bb = Blackboard.connect(redis.url, INSTANCE);
  bb.redis.on('error', () => undefined); // the outage drills stop Redis under it
  await register(bb, [o.scalable ? { role: ROLE, kind: 'scalable', worker_target: 'coder' } : ROLE]);
  let nats: NatsServer | undefined;
  let postgres: World['postgres'];
  if (o.scalable) {
    nats = await startNats({ dir: join(dir, 'nats') });
    const pgDir = join(dir, 'pg');
    const port = await freePort();
    const first = await startPostgres({ dir: pgDir, port });
    postgres = {
      server: first,
      async restart(downMs) {
        await this.server.stop();
        await sleep(downMs);
        this.server = await startPostgres({ dir: pgDir, port });
      },
    };
  }
  const healthPort = await freePort();
  const stores = { DATABASE_URL: postgres?.server.url ?? '', NATS_URL: nats?.url ?? '' };
  const toolPath = join(dir, 'tool.sh');
  const runsLog = join(dir, 'runs.log');
  writeFileSync(toolPath, tool(runsLog), { mode: 0o755 });
  // Every claim_granted, heard by a subscriber of our own.
  const sub = new Redis(redis.url);
  sub.on('error', () => undefined);
  const grants = new Map<string, number>();
  let reopened = 0;
  // Per call id (the output id of an exclusive grant: the drill's only kind).
  const reopenedCalls = new Map<string, number>();
  sub.on('message', (_c: string, raw: string) => {
    const m = JSON.parse(raw) as { event?: string; data?: { claim_id?: string; agent_name?: string } };
    if (m.event === 'grant_reopened') {
      reopened++;
      const call = outputId(INSTANCE, m.data?.claim_id ?? '', m.data?.agent_name ?? '', 'exclusive');
      reopenedCalls.set(call, (reopenedCalls.get(call) ?? 0) + 1);
    }
    if (m.event !== 'claim_granted') return;
    const k = `${m.data?.claim_id}/${m.data?.agent_name}`;
    grants.set(k, (grants.get(k) ?? 0) + 1);
  });
  await sub.subscribe(bb.k.channels.workflowEvents, bb.k.channels.workflowEventsExt);
  const orchestrator = new Program(
    'orchestrator',
    dir,
    'src/orchestrator/main.ts',
    {
      HOLT_INSTANCE_NAME: INSTANCE,
      REDIS_URL: redis.url,
      HOLT_HEALTH_PORT: String(healthPort),
      // A killed leader's lease runs out fast, so a drill of many kills stays short.
      HOLT_LEASE_TTL_MS: '1500',
      HOLT_STANDBY_POLL_MS: '100',
      HOLT_RECONCILE_INTERVAL_MS: '250',
      HOLT_REDISPATCH_AFTER_MS: '3000',
      HOLT_BID_TIMEOUT_MS: '10000',
      HOLT_INBOX_WATCHDOG_MS: '300',
      // Kills land on the same row again and again; a row is only given up on after many.
      HOLT_INBOX_MAX_ATTEMPTS: '20',
      ...stores,
    },
    '"event_type":"recovery_complete"',
  );
  const pupEnv = {
    HOLT_INSTANCE_NAME: INSTANCE,
    HOLT_AGENT_NAME: ROLE,
    REDIS_URL: redis.url,
    HOLT_AGENT_COMMAND: JSON.stringify(['/bin/sh', toolPath]),
    HOLT_BIDDING_STRATEGY: 'exclusive',
    HOLT_HEALTH_PORT: '0',
    HOLT_WORKSPACE: dir,
    HOLT_RESCAN_INTERVAL_MS: '500',
    HOLT_SHUTDOWN_GRACE_MS: '0',
    // A killed pup's execution lease runs out fast (it is renewed while a run lasts).
    HOLT_EXECUTION_LEASE_MS: '1500',
  };
  const ready = '"event_type":"pup_started"';
  // Scalable: `pup` is the inbox worker (it executes), `controller` bids.
  const pup = new Program(
    'pup',
    dir,
    'src/agent/main.ts',
    o.scalable
      ? {
          ...pupEnv,
          ...stores,
          HOLT_MODE: 'worker',
          HOLT_WORKER_TARGET: 'coder',
          HOLT_WORKER_LEASE_MS: '3000',
        }
      : pupEnv,
    ready,
  );
  const controller = o.scalable
    ? new Program('controller', dir, 'src/agent/main.ts', { ...pupEnv, HOLT_MODE: 'controller' }, ready)
    : undefined;
  await orchestrator.start();
  await Promise.all([pup.start(), controller?.start()]);

  return {
    redis,
    nats,
    postgres,
    controller,
    bb,
    orchestrator,
    pup,
    healthPort,
    reopened: () => reopened,
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
          const codes = await bb.getArtefacts(await childrenOf(bb, g));
          const code = codes.filter((a) => a?.produced_by_role === ROLE);
          if (code.length > 1) outputsTwice++;
          const c = code[0];
          if (!c) continue;
          const ends = (await bb.getArtefacts(await childrenOf(bb, c.id))).filter(
            (a) => a?.produced_by_role === ROLE,
          );
          if (ends.length > 1) outputsTwice++;
          if (ends.some((a) => a?.structural_type === 'Terminal')) finished++;
        }
        if (finished === goals.length || Date.now() > deadline) break;
        await sleep(200);
      }
      if (finished < goals.length) {
        // What a failed drill needs to be understood: each process's last lines (all logs kept with HOLT_TEST_KEEP=1).
        const procs = [orchestrator, pup, controller].flatMap((p) => (p?.proc ? [p.proc] : []));
        for (const p of procs) console.error(`--- ${p.name} (${p.logFile})\n${p.tail(40)}`);
      }
      const grantedTwice = o.countGrants === false ? 0 : [...grants.values()].filter((n) => n > 1).length;
      const processes = [...pup.history, ...(controller?.history ?? [])];
      const runs = countRuns(readRuns(runsLog), processes, reopenedCalls);
      return { finished, duplicated: grantedTwice + outputsTwice + runs.dupRunsUnexpected, runs };
    },
    async close() {
      await Promise.all([orchestrator.stop(), pup.stop(), controller?.stop()]);
      sub.disconnect();
      await bb.close();
      await Promise.all([redis.stop(), nats?.stop(), postgres?.server.stop()]);
      if (process.env.HOLT_TEST_KEEP) console.error(`drill: kept ${dir}`);
      else removeDir(dir);
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
  o: { workflows: number; kills: number; seed?: number; limitMs?: number; scalable?: boolean },
): Promise<DrillResult> {
  const t0 = Date.now();
  const w = await startWorld({ scalable: o.scalable });
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
    return resultOf(drill, goals, s, kills, recover, t0);
  } finally {
    await w.close();
  }
}

/** The orchestrator's /healthz and /readyz status codes now (0: no answer). */
async function probes(port: number): Promise<{ healthz: number; readyz: number }> {
  const get = (path: string) =>
    fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(3_000) }).then(
      (r) => r.status,
      () => 0,
    );
  const [healthz, readyz] = await Promise.all([get('/healthz'), get('/readyz')]);
  return { healthz, readyz };
}

export interface OutageResult extends DrillResult {
  /** Per store: what the probes said during the outage, and how long after it ended both were 200. */
  outages: {
    store: string;
    down_ms: number;
    healthz_during: number[];
    readyz_during: number[];
    ready_after_ms: number;
  }[];
}

/**
 * R3: Redis (AOF on), NATS and Postgres each stopped for `downMs` in the middle of a run of scalable
 * workflows (inbox worker, doorbells), then started again on the same data. All work must finish;
 * the orchestrator's probes are sampled during each outage and timed back to 200 after it.
 */
export async function outageDrill(o: {
  workflows: number;
  downMs: number;
  limitMs?: number;
}): Promise<OutageResult> {
  const t0 = Date.now();
  const w = await startWorld({ scalable: true });
  try {
    const goals = await w.post(o.workflows);
    const outages: OutageResult['outages'] = [];
    const stores: [string, (downMs: number) => Promise<void>][] = [
      ['redis', (d) => w.redis.restart(d)],
      ['nats', (d) => (w.nats as NatsServer).restart(d)],
      ['postgres', (d) => (w.postgres as NonNullable<World['postgres']>).restart(d)],
    ];
    for (const [store, restart] of stores) {
      await sleep(300);
      const during: { healthz: number; readyz: number }[] = [];
      let down = true;
      const sampling = (async () => {
        await sleep(Math.min(200, o.downMs / 3)); // once the store is surely gone
        while (down) {
          during.push(await probes(w.healthPort));
          await sleep(100);
        }
      })();
      await restart(o.downMs);
      down = false;
      await sampling;
      const back = Date.now();
      for (;;) {
        const p = await probes(w.healthPort);
        if ((p.healthz === 200 && p.readyz === 200) || Date.now() - back > 60_000) break;
        await sleep(50);
      }
      outages.push({
        store,
        down_ms: o.downMs,
        healthz_during: [...new Set(during.map((p) => p.healthz))],
        readyz_during: [...new Set(during.map((p) => p.readyz))],
        ready_after_ms: Date.now() - back,
      });
    }
    const s = await w.settle(goals, o.limitMs ?? 120_000);
    const recover = outages.map((x) => x.ready_after_ms);
    return {
      ...resultOf('R3 restart Redis, NATS, Postgres', goals, s, outages.length, recover, t0),
      outages,
    };
  } finally {
    await w.close();
  }
}

export interface LossResult extends DrillResult {
  /** Grants reopened because their output was lost (grant_reopened events). */
  reopened: number;
}

/**
 * R4: Redis loses data mid-run. A snapshot (SAVE) is taken with the work under way, the run goes on,
 * then Redis restarts from that snapshot: every write since is gone, while Postgres remembers inbox
 * rows as done. The lost outputs must be detected and their grants re-run; nothing left hanging.
 */
export async function lossDrill(o: { workflows: number; limitMs?: number }): Promise<LossResult> {
  const t0 = Date.now();
  const w = await startWorld({ scalable: true, snapshotOnly: true, countGrants: false });
  try {
    const goals = await w.post(o.workflows);
    // The snapshot once some work is done: what follows it is what the restore loses.
    for (;;) {
      const done = (await w.postgres?.server) && (await countDone(w));
      if ((done ?? 0) >= Math.max(1, Math.floor(o.workflows / 4))) break;
      await sleep(50);
    }
    await w.bb.redis.call('SAVE');
    const saved = Date.now();
    for (;;) {
      if ((await countDone(w)) >= Math.floor(o.workflows / 2) || Date.now() - saved > 10_000) break;
      await sleep(50);
    }
    await w.redis.restart(0); // no save on shutdown: it comes back as of the snapshot
    const back = Date.now();
    const s = await w.settle(goals, o.limitMs ?? 120_000);
    const recovered = Date.now() - back;
    return { ...resultOf('R4 lose Redis data', goals, s, 1, [recovered], t0), reopened: w.reopened() };
  } finally {
    await w.close();
  }
}

/** Inbox rows done so far. */
async function countDone(w: World): Promise<number> {
  const pool = createPool((w.postgres as NonNullable<World['postgres']>).server.url);
  try {
    const r = await pool.query(`SELECT count(*)::int AS n FROM holt.agent_inbox WHERE status = 'done'`);
    return r.rows[0].n as number;
  } finally {
    await pool.end();
  }
}
