/**
 * Context assembly on a 5 000-artefact graph of depth 10 (10% of threads reworked to v2): Redis round
 * trips and milliseconds, against one HGETALL pipeline per level over the same ids (the floor: an
 * MGET-like read that knows nothing of threads) and a plain-pipeline walk (3 dependent pipelines a level).
 * Run: node bench/context/main.ts   (prints one JSON object)
 */
import { randomUUID } from 'node:crypto';
import { Blackboard } from '../../src/blackboard/client.ts';
import { contextLevel } from '../../src/blackboard/pup-reads.ts';
import type { Artefact } from '../../src/blackboard/types.ts';
import { assembleContext, type FetchLevel } from '../../src/pup/context.ts';
import { startRedis } from '../../test/harness/redis.ts';

const LEVELS = 10;
const PER_LEVEL = 500;
const FANOUT = 3;
const RUNS = 15;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return Number((s[Math.floor(s.length / 2)] as number).toFixed(2));
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

const redis = await startRedis();
const bb = Blackboard.connect(redis.url, 'bench');
try {
  // level 1 is nearest the target, level 10 the oldest; 10% of each level is a v2 of another in it
  let clock = 1_700_000_000_000;
  const levels: string[][] = [];
  const all: Artefact[] = [];
  for (let l = LEVELS; l >= 1; l--) {
    const deeper = levels[l + 1] ?? [];
    const ids: string[] = [];
    const v1count = PER_LEVEL * 0.9;
    for (let i = 0; i < v1count; i++) {
      const id = randomUUID();
      const sources = deeper.length
        ? Array.from({ length: FANOUT }, () => deeper[Math.floor(Math.random() * deeper.length)] as string)
        : [];
      all.push({
        id,
        logical_id: id,
        version: 1,
        structural_type: 'Standard',
        type: `L${l}`,
        payload: 'x'.repeat(200),
        source_artefacts: sources,
        produced_by_role: 'coder',
        created_at_ms: clock++,
      });
      ids.push(id);
    }
    for (let i = 0; i < PER_LEVEL - v1count; i++) {
      const v1 = all[all.length - v1count + i] as Artefact;
      all.push({
        ...v1,
        id: randomUUID(),
        version: 2,
        source_artefacts: [v1.id, ...v1.source_artefacts],
        created_at_ms: clock++,
      });
    }
    levels[l] = ids;
  }
  for (let i = 0; i < all.length; i += 500)
    await Promise.all(all.slice(i, i + 500).map((a) => bb.createArtefact(a)));
  const roots = (levels[1] as string[]).slice(0, 100);

  // our walk: one script call per level
  const frontiers: string[][] = [];
  let trips = 0;
  const recording: FetchLevel = (ids) => {
    trips++;
    frontiers.push(ids);
    return contextLevel(bb, ids);
  };
  await contextLevel(bb, roots.slice(0, 1)); // load the script (a fresh server costs one extra round trip once)
  await bb.redis.config('RESETSTAT');
  const first = await assembleContext(roots, recording);
  const stats = await bb.redis.info('commandstats');
  const evalshaCalls = Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  const evalCalls = Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  const ours: number[] = [];
  for (let i = 0; i < RUNS; i++)
    ours.push(await time(() => assembleContext(roots, (ids) => contextLevel(bb, ids))));

  // floor: one HGETALL pipeline per level over exactly the ids our walk fetched
  const floor: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    floor.push(
      await time(async () => {
        for (const ids of frontiers) await bb.getArtefacts(ids);
      }),
    );
  }

  // the same walk with plain pipelines: artefacts, then their threads, then the newer versions
  let plainTrips = 0;
  const plain: FetchLevel = async (ids) => {
    const arts = await bb.getArtefacts(ids);
    const latest = await bb.latestInThreads(arts.flatMap((a) => (a ? [a.logical_id] : [])));
    const newer = arts.map((a) => {
      const t = a && latest.get(a.logical_id);
      return t && a && t.version > a.version ? t.id : null;
    });
    const newerIds = newer.filter((x): x is string => x !== null);
    const fetched = newerIds.length ? await bb.getArtefacts(newerIds) : [];
    plainTrips += newerIds.length ? 3 : 2;
    const byId = new Map(fetched.flatMap((a) => (a ? [[a.id, a] as const] : [])));
    return {
      found: arts.map((a, i) => ({
        artefact: a,
        latest: newer[i] ? (byId.get(newer[i] as string) ?? null) : null,
      })),
      malformed: [],
    };
  };
  await assembleContext(roots, plain);
  const plainMs: number[] = [];
  for (let i = 0; i < RUNS; i++) plainMs.push(await time(() => assembleContext(roots, plain)));

  const oursMs = median(ours);
  const floorMs = median(floor);
  process.stdout.write(
    `${JSON.stringify(
      {
        bench: 'context_assembly',
        graph: {
          artefacts: all.length,
          depth: LEVELS,
          per_level: PER_LEVEL,
          fanout: FANOUT,
          reworked_threads: '10%',
        },
        context: {
          artefacts: first.chain.length,
          levels: first.levels,
          ids_fetched: frontiers.reduce((n, f) => n + f.length, 0),
        },
        ours: { round_trips: trips, redis_script_calls: evalshaCalls + evalCalls, median_ms: oursMs },
        one_pipeline_per_level_floor: { round_trips: frontiers.length, median_ms: floorMs },
        plain_pipelines: { round_trips: plainTrips / (RUNS + 1), median_ms: median(plainMs) },
        ratio_vs_floor: Number((oursMs / floorMs).toFixed(2)),
        target: 'round_trips == depth; time within 1.2x of one pipeline per level (issue 20)',
        runs: RUNS,
      },
      null,
      2,
    )}\n`,
  );
} finally {
  await bb.close();
  await redis.stop();
}
