/**
 * The fault drills at full size, with real processes and real kills (the CI-sized versions are
 * test/drills): R1 SIGKILL the orchestrator 50 times during 100 workflows; R2 SIGKILL the pup 100
 * times, then an inbox worker 100 times; R3 stop Redis (AOF on), NATS and Postgres for 3 s each mid-run; R4 restore Redis from an
 * older snapshot mid-run. Prints a table and, last, one JSON line with every figure.
 * Every drill must show 0 lost and 0 duplicated. (R5, pods killed on the real node, is in
 * e2e/cluster.test.ts.)
 * Run: node bench/drills/main.ts [scale=1] (scale 0.1 for a quick look)
 */
import { type DrillResult, killDrill, lossDrill, outageDrill } from '../../test/drills/world.ts';

const scale = Math.max(0.05, Number(process.argv[2] ?? 1));
const n = (x: number) => Math.max(2, Math.round(x * scale));
const results: DrillResult[] = [];
const show = (r: DrillResult) => {
  results.push(r);
  process.stderr.write(
    `${r.drill}: ${r.finished}/${r.workflows} finished, lost ${r.lost}, duplicated ${r.duplicated}\n`,
  );
};

show(
  await killDrill('R1 kill -9 orchestrator', 'orchestrator', {
    workflows: n(100),
    kills: n(50),
    seed: 1,
    limitMs: 300_000,
  }),
);
show(
  await killDrill('R2 kill -9 pup', 'pup', { workflows: n(100), kills: n(100), seed: 2, limitMs: 300_000 }),
);
show(
  await killDrill('R2 kill -9 inbox worker', 'pup', {
    workflows: n(100),
    kills: n(100),
    seed: 3,
    limitMs: 300_000,
    scalable: true,
  }),
);
show(await outageDrill({ workflows: n(100), downMs: 3_000, limitMs: 300_000 }));
show(await lossDrill({ workflows: n(100), limitMs: 300_000 }));

const cols = [
  'drill',
  'workflows',
  'finished',
  'lost',
  'duplicated',
  'runs',
  'dupRunsByDesign',
  'dupRunsUnexpected',
  'kills',
  'recover_p50_ms',
  'recover_max_ms',
  'seconds',
] as const;
const rows = [cols.map(String), ...results.map((r) => cols.map((c) => String(r[c])))];
const width = cols.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
for (const r of rows) console.log(r.map((v, i) => v.padEnd(width[i] ?? 0)).join('  '));
console.log(JSON.stringify({ bench: 'drills', scale, results }));
process.exit(results.every((r) => r.lost === 0 && r.duplicated === 0) ? 0 : 1);
