import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { claimToHash, claimToJson } from '../blackboard/codec.ts';
import { executionLeaseKey } from '../blackboard/execution-lease.ts';
import { outputId } from '../blackboard/grants.ts';
import { publishGrant, updateClaim } from '../blackboard/testkit.ts';
import type { Claim } from '../blackboard/types.ts';
import { createLogger, silentLogger } from '../common/logger.ts';
import { freePort } from '../local/ports.ts';
import { Pup } from './pup.ts';
import { questionId } from './questions.ts';
import { startRunnerServer } from './runner/socket.ts';
import { artefact, claim, config, grantedClaim, node, sh } from './testkit.ts';

let redis: RedisServer;
let ws: string;
const pups: Pup[] = [];
const boards: Blackboard[] = [];
beforeAll(async () => {
  redis = await startRedis();
  ws = makeTempDir('ws');
});
afterAll(async () => {
  await Promise.all(pups.map((p) => p.stop(0)));
  await Promise.all(boards.map((b) => b.close()));
  await redis?.stop();
  removeDir(ws);
});

async function startPup(instance: string, env: Record<string, string>) {
  const pup = new Pup(
    config({ REDIS_URL: redis.url, HOLT_INSTANCE_NAME: instance, HOLT_WORKSPACE: ws, ...env }),
  );
  pups.push(pup);
  await pup.start();
  return pup;
}

function board(instance: string) {
  const bb = Blackboard.connect(redis.url, instance);
  bb.redis.on('error', () => undefined); // the health test stops Redis under it
  boards.push(bb);
  return bb;
}

const bidOf = (bb: Blackboard, c: Claim) =>
  eventually(`bid on ${c.id}`, async () => (await bb.getBids(c.id)).coder);
const outputOf = (bb: Blackboard, c: Claim, t: 'review' | 'claim' | 'exclusive' = 'exclusive') =>
  eventually(`output of ${c.id}`, () => bb.getArtefact(outputId(bb.instance, c.id, 'coder', t)));

async function grant(bb: Blackboard, c: Claim, over: Partial<Claim>, announce: boolean) {
  const vc = await bb.getClaim(c.id);
  if (!vc) throw new Error('no claim');
  const updated = { ...vc.claim, ...over };
  expect(await updateClaim(bb, updated, vc.rev)).not.toBeNull();
  if (announce) await publishGrant(bb, 'coder', c.id, 'exclusive');
  return updated;
}

/** As Holt's orchestrator writes a claim: the hash alone, no index. */
const holtWrite = async (bb: Blackboard, c: Claim) => {
  await bb.redis.hset(bb.k.claim(c.id), claimToHash(c));
};
/** As Holt's orchestrator announces a new claim: one claim_events message. */
const holtAnnounce = (bb: Blackboard, c: Claim) =>
  bb.redis.publish(bb.k.channels.claimEvents, JSON.stringify(claimToJson(c)));

/** Fills a grant queue of one: `a` granted and running, `b` granted and queued behind it. */
async function fillQueueOfOne(bb: Blackboard, pup: Pup): Promise<[Claim, Claim]> {
  const [a, b] = [(await grantedClaim(bb, {})).claim, (await grantedClaim(bb, {})).claim];
  await bidOf(bb, a);
  await bidOf(bb, b);
  await grant(bb, a, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' }, true);
  await eventually(
    'a to run',
    async () =>
      (await bb.redis.exists(executionLeaseKey(bb, outputId(bb.instance, a.id, 'coder', 'exclusive')))) > 0,
  );
  await grant(bb, b, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' }, true);
  await eventually('b queued', async () =>
    (await pup.metrics.registry.getSingleMetricAsString('holt_pup_grants_total')).includes('} 2'),
  );
  return [a, b];
}

async function http(pup: Pup, path: string) {
  const res = await fetch(`http://127.0.0.1:${pup.port}${path}`);
  return { status: res.status, body: await res.text() };
}

describe('standard mode', () => {
  it('bids on claims from before its start and from claim_events, and keeps bidding while a tool runs', async () => {
    const bb = board('std');
    const before = await grantedClaim(bb, {});
    // no timer re-scan here: what happens is due to the start-up scan and the channels
    const pup = await startPup('std', {
      HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '3')),
      HOLT_RESCAN_INTERVAL_MS: '600000',
    });
    expect(await bidOf(bb, before.claim)).toBe('exclusive');
    const b = await grantedClaim(bb, {});
    expect(await bidOf(bb, b.claim)).toBe('exclusive');

    await grant(bb, b.claim, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' }, true);
    const out = outputId('std', b.claim.id, 'coder', 'exclusive');
    await eventually(
      'the tool to start',
      async () => (await bb.redis.exists(executionLeaseKey(bb, out))) > 0,
    );
    const c = await grantedClaim(bb, {});
    expect(await bidOf(bb, c.claim)).toBe('exclusive');
    // the bid landed while the slow tool was still running
    expect(await bb.getArtefact(out)).toBeNull();
    expect(await bb.redis.exists(executionLeaseKey(bb, out))).toBe(1);
    expect((await outputOf(bb, b.claim)).type).toBe('SlowResult');

    // the artefact is written before the run is counted: wait for the count
    const metrics = await eventually('the tool run in /metrics', async () => {
      const m = (await http(pup, '/metrics')).body;
      return /holt_pup_tool_duration_seconds_count\{[^}]*outcome="success"[^}]*\} 1/.test(m) && m;
    });
    expect(metrics).toMatch(/holt_pup_bids_total\{[^}]*bid_type="exclusive",source="strategy"[^}]*\} 3/);
    expect(metrics).toMatch(/holt_pup_grants_total\{[^}]*claim_type="exclusive",via="event"[^}]*\} 1/);
    expect((await http(pup, '/readyz')).status).toBe(200);
  });

  it("grants announced while a tool runs all run, none dropped, where no index lists the claims (Holt's orchestrator)", async () => {
    const bb = board('burst');
    const pup = await startPup('burst', {
      HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '0.3')),
      HOLT_RESCAN_INTERVAL_MS: '600000',
    });
    const claims: Claim[] = [];
    for (let i = 0; i < 6; i++) {
      const { claim: c } = await grantedClaim(bb, {});
      await bidOf(bb, c);
      claims.push(c);
    }
    // Holt's orchestrator keeps no index of active claims: the announcements are all the pup hears.
    await bb.redis.del(bb.k.activeClaims);
    for (const c of claims)
      await grant(bb, c, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' }, true);
    for (const c of claims) expect((await outputOf(bb, c)).type).toBe('SlowResult');
    expect(await pup.metrics.registry.getSingleMetricAsString('holt_pup_grants_total')).toMatch(
      /via="event"[^}]*\} 6/,
    );
  });

  it("under an orchestrator that writes no index (Holt's): lost grants run from the re-scan, a full queue and a restart lose none", async () => {
    const bb = board('noindex');
    // Holt's orchestrator: the claim hash, its idempotency key and one claim_events message; no index.
    const holtClaim = async () => {
      const target = artefact();
      await bb.createArtefact(target);
      const c = claim(target.id);
      await holtWrite(bb, c);
      await bb.redis.set(bb.k.claimByArtefact(target.id), c.id);
      await holtAnnounce(bb, c);
      return c;
    };
    const granted = (c: Claim): Claim => ({
      ...c,
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
    });
    const env = {
      HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '0.2')),
      HOLT_GRANT_QUEUE: '2',
      HOLT_RESCAN_INTERVAL_MS: '300',
    };
    const first = await startPup('noindex', env);
    const claims: Claim[] = [];
    for (let i = 0; i < 5; i++) claims.push(await holtClaim());
    for (const c of claims) await bidOf(bb, c);
    // Every announcement lost, and more grants than the queue holds: the re-scan offers them in turn.
    for (const c of claims) await holtWrite(bb, granted(c));
    for (const c of claims) expect((await outputOf(bb, c)).type).toBe('SlowResult');
    expect(await first.metrics.registry.getSingleMetricAsString('holt_pup_grants_total')).toMatch(
      /via="rescan"[^}]*\} 5/,
    );

    // Granted while its pup was away (the announcement went nowhere): the next pup finds it at start.
    const late = await holtClaim();
    await bidOf(bb, late);
    await first.stop(5_000);
    await holtWrite(bb, granted(late));
    await startPup('noindex', { ...env, HOLT_RESCAN_INTERVAL_MS: '600000' });
    expect((await outputOf(bb, late)).type).toBe('SlowResult');
    expect(await bb.redis.exists(bb.k.activeClaims)).toBe(0);

    // Settled claims leave the role's pup claims on a re-scan.
    expect(await bb.redis.zscore(bb.k.pupClaims('coder'), late.id)).not.toBeNull();
    for (const c of [...claims, late]) await holtWrite(bb, { ...granted(c), status: 'complete' });
    const probe = await startPup('noindex', {
      ...env,
      HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '0')),
    });
    await eventually('pruned', async () => (await bb.redis.zcard(bb.k.pupClaims('coder'))) === 0 || null);
    await probe.stop(5_000);
  });

  it("a rework assigned while the grant queue is full waits for room and runs, where no index lists it (Holt's orchestrator)", async () => {
    const bb = board('fbfull');
    const pup = await startPup('fbfull', {
      HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '0.5')),
      HOLT_GRANT_QUEUE: '1',
      HOLT_RESCAN_INTERVAL_MS: '300',
    });
    const [, b] = await fillQueueOfOne(bb, pup);
    await bb.redis.del(bb.k.activeClaims);
    // Holt's orchestrator assigns a rework: the claim hash and one claim_events message, nothing else.
    const v1 = artefact({ produced_by_role: 'coder', type: 'RecipeYAML' });
    await bb.createArtefact(v1);
    const fb = claim(v1.id, { status: 'pending_assignment', granted_exclusive_agent: 'coder' });
    await holtWrite(bb, fb);
    await holtAnnounce(bb, fb);
    // It is not dropped: its claim event waits for room in the queue, as a bid does.
    expect(await outputOf(bb, fb)).toMatchObject({ version: 2, logical_id: v1.logical_id });
    expect(await pup.metrics.registry.getSingleMetricAsString('holt_pup_grants_total')).toMatch(
      /via="claim_event"[^}]*\} 1/,
    );
    expect((await outputOf(bb, b)).type).toBe('SlowResult');
  });

  it('stopping with a full queue: the running tool finishes, nothing queued starts, no bid waits on', async () => {
    const bb = board('fullstop');
    const pup = await startPup('fullstop', {
      HOLT_AGENT_COMMAND: JSON.stringify(sh('slow.sh', '1')),
      HOLT_GRANT_QUEUE: '1',
      HOLT_RESCAN_INTERVAL_MS: '600000',
    });
    const [a, b] = await fillQueueOfOne(bb, pup);
    // The queue (of one) is full: a new claim's bid waits for room.
    const c = (await grantedClaim(bb, {})).claim;
    await new Promise((r) => setTimeout(r, 200));
    expect(await bb.getBids(c.id)).toEqual({});
    await pup.stop(10_000);
    expect((await bb.getArtefact(outputId('fullstop', a.id, 'coder', 'exclusive')))?.type).toBe('SlowResult');
    expect(await bb.getArtefact(outputId('fullstop', b.id, 'coder', 'exclusive'))).toBeNull();
    expect(
      await bb.redis.exists(executionLeaseKey(bb, outputId('fullstop', b.id, 'coder', 'exclusive'))),
    ).toBe(0);
    expect(await bb.getBids(c.id)).toEqual({});
  });

  it('bids on a burst of claims side by side, never more at once than HOLT_BID_CONCURRENCY', async () => {
    const bb = board('bidburst');
    const dir = join(ws, 'bidburst');
    const claims: Claim[] = [];
    for (let i = 0; i < 8; i++) claims.push((await grantedClaim(bb, {})).claim);
    // Each bid counts the bids running beside it (one file each) before it answers.
    const script =
      'mkdir -p "$1"; touch "$1/run.$$"; ls "$1" | grep -c "^run" >>"$1/seen"; sleep 0.5; rm "$1/run.$$"; cat >/dev/null; echo exclusive';
    await startPup('bidburst', {
      HOLT_AGENT_BID_SCRIPT: JSON.stringify(['sh', '-c', script, 'bid', dir]),
      HOLT_BID_CONCURRENCY: '3',
      HOLT_RESCAN_INTERVAL_MS: '600000',
    });
    for (const c of claims) expect(await bidOf(bb, c)).toBe('exclusive');
    const seen = readFileSync(join(dir, 'seen'), 'utf8').trim().split('\n').map(Number);
    expect(seen).toHaveLength(8);
    expect(Math.max(...seen)).toBeGreaterThan(1);
    expect(Math.max(...seen)).toBeLessThanOrEqual(3);
  });

  it('a lost grant announcement is recovered by the re-scan; a feedback claim is reworked', async () => {
    const bb = board('lost');
    const pup = await startPup('lost', {});
    const { claim: c } = await grantedClaim(bb, {});
    await bidOf(bb, c);
    await grant(bb, c, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' }, false);
    expect((await outputOf(bb, c)).type).toBe('EchoResult');
    expect(await pup.metrics.registry.getSingleMetricAsString('holt_pup_grants_total')).toMatch(
      /via="rescan"/,
    );

    const v1 = artefact({ produced_by_role: 'coder', type: 'RecipeYAML' });
    const fb = await grantedClaim(bb, { status: 'pending_assignment', granted_exclusive_agent: 'coder' }, v1);
    expect(await outputOf(bb, fb.claim)).toMatchObject({
      version: 2,
      logical_id: v1.logical_id,
      type: 'RecipeYAML',
    });
    expect(await bb.getBids(fb.claim.id)).toEqual({}); // feedback claims are assigned, never bid on
  });
});

describe('a command tool that asks a Question', () => {
  it('keeps its grant open, and delivers on the re-scan after the Answer', async () => {
    const bb = board('ask');
    await startPup('ask', {
      HOLT_AGENT_COMMAND: JSON.stringify(node('echo.mjs', 'ask')),
      HOLT_RESCAN_INTERVAL_MS: '200',
    });
    const { claim: c } = await grantedClaim(bb, {});
    await bidOf(bb, c);
    await grant(bb, c, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' }, true);
    const qid = questionId(outputId('ask', c.id, 'coder', 'exclusive'), 0);
    const q = await eventually('the Question', () => bb.getArtefact(qid));
    expect(q.structural_type).toBe('Question');
    expect(await bb.getArtefact(outputId('ask', c.id, 'coder', 'exclusive'))).toBeNull();
    await bb.createArtefact(
      artefact({ structural_type: 'Answer', type: 'Answer', payload: 'in scope', source_artefacts: [qid] }),
    );
    expect(await outputOf(bb, c)).toMatchObject({ type: 'Decision', payload: 'in scope' });
  });
});

describe('controller mode and bid scripts', () => {
  it('bids with the script, falls back to the strategy, bids ignore on an unreadable target, never executes', async () => {
    const bb = board('ctl');
    const pup = await startPup('ctl', {
      HOLT_MODE: 'controller',
      HOLT_AGENT_COMMAND: '',
      HOLT_BIDDING_STRATEGY: 'claim',
      HOLT_AGENT_BID_SCRIPT: JSON.stringify(sh('bid.sh', 'review')),
      HOLT_BID_SCRIPT_TIMEOUT_MS: '300',
    });
    const cases: [string, string][] = [
      ['Plain', 'review'],
      ['FailBid', 'claim'],
      ['VagueBid', 'claim'],
      ['SlowBid', 'claim'],
    ];
    for (const [type, bid] of cases) {
      const { claim: c } = await grantedClaim(bb, {}, artefact({ type }));
      expect([type, await bidOf(bb, c)]).toEqual([type, bid]);
    }
    const orphan = claim(artefact().id); // its target was never written
    await bb.createClaim(orphan);
    expect(await bidOf(bb, orphan)).toBe('ignore');

    const g = await grantedClaim(bb, {});
    await bidOf(bb, g.claim);
    await grant(bb, g.claim, { status: 'pending_exclusive', granted_exclusive_agent: 'coder' }, true);
    const later = await grantedClaim(bb, {});
    await bidOf(bb, later.claim);
    expect(await bb.getArtefact(outputId('ctl', g.claim.id, 'coder', 'exclusive'))).toBeNull();
    expect(await pup.metrics.registry.getSingleMetricAsString('holt_pup_grants_total')).not.toMatch(/ \d+$/m);
  });
});

describe('health', () => {
  it('started before its Redis exists: live, not ready and saying why, retries with growing pauses, then bids', async () => {
    // Issue 29: a pup whose Redis Service did not resolve yet exited after three quick tries and
    // crash-looped, and was not there to bid on the first claim. It now waits, as the orchestrator does.
    const port = await freePort();
    const lines: { event_type?: string; retry_ms?: number; store?: string }[] = [];
    const log = createLogger('pup', {}, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const pup = new Pup(
      config({
        REDIS_URL: `redis://127.0.0.1:${port}`,
        HOLT_INSTANCE_NAME: 'late-redis',
        HOLT_WORKSPACE: ws,
      }),
      log,
    );
    pups.push(pup);
    const started = pup.start();
    const waiting = await eventually('three tries and the probes up', async () =>
      pup.port === undefined || lines.filter((l) => l.event_type === 'stores_unavailable').length < 3
        ? undefined
        : await http(pup, '/readyz'),
    );
    expect(waiting.status).toBe(503);
    expect(waiting.body).toContain('waiting for redis');
    expect((await http(pup, '/healthz')).status).toBe(200);
    const late = await startRedis({ port });
    try {
      await started;
      const tries = lines.filter((l) => l.event_type === 'stores_unavailable');
      expect(tries.every((l) => l.store === 'redis')).toBe(true);
      // Pauses grow (equal jitter: each at least half the doubled base), never a hot loop.
      expect(tries[2]?.retry_ms).toBeGreaterThanOrEqual(1_000);
      expect(lines.some((l) => l.event_type === 'stores_reachable')).toBe(true);
      expect((await http(pup, '/readyz')).status).toBe(200);
      const bb = Blackboard.connect(late.url, 'late-redis');
      try {
        const { claim: c } = await grantedClaim(bb, {});
        await bidOf(bb, c);
      } finally {
        await bb.close();
      }
    } finally {
      await pup.stop(0);
      await late.stop();
    }
  });

  it('/readyz waits for the custom check to pass once; /healthz does not', async () => {
    const release = `${ws}/check-may-finish`;
    const pup = await startPup('ready', {
      // The first run does not finish until the test lets it.
      HOLT_HEALTH_CHECK_COMMAND: JSON.stringify([
        'sh',
        '-c',
        `while [ ! -e '${release}' ]; do sleep 0.05; done`,
      ]),
      HOLT_HEALTH_CHECK_INTERVAL_MS: '100',
    });
    expect(await http(pup, '/healthz')).toMatchObject({ status: 200 });
    const before = await http(pup, '/readyz');
    expect(before.status).toBe(503);
    expect(before.body).toContain('health check not run yet');
    const { writeFileSync } = await import('node:fs');
    writeFileSync(release, '');
    await eventually('ready once the check passed', async () => (await http(pup, '/readyz')).status === 200);
  });

  it('/healthz follows the custom check, and flips to 503 when Redis stops and back when it returns', async () => {
    const flag = `${ws}/unhealthy`;
    const pup = await startPup('health', {
      HOLT_HEALTH_CHECK_COMMAND: JSON.stringify(sh('health.sh', flag)),
      HOLT_HEALTH_CHECK_INTERVAL_MS: '100',
    });
    expect(await http(pup, '/healthz')).toMatchObject({ status: 200 });
    const { writeFileSync, rmSync } = await import('node:fs');
    writeFileSync(flag, '');
    const bad = await eventually('health check failure', async () => {
      const r = await http(pup, '/healthz');
      return r.status === 503 && r;
    });
    expect(JSON.parse(bad.body)).toMatchObject({
      status: 'unhealthy',
      error: expect.stringMatching(/unhealthy: .* exists/),
    });
    rmSync(flag);
    await eventually('health check recovery', async () => (await http(pup, '/healthz')).status === 200);

    await redis.proc.stop();
    const down = await eventually('503 with Redis down', async () => {
      const r = await http(pup, '/healthz');
      return r.status === 503 && r;
    });
    expect(JSON.parse(down.body)).toMatchObject({ status: 'unhealthy', redis: 'disconnected' });
    expect((await http(pup, '/readyz')).status).toBe(503);
    await redis.restart();
    await eventually('200 after Redis returns', async () => (await http(pup, '/healthz')).status === 200);
    // and it works again after the reconnect
    const bb = board('health');
    const { claim: c } = await grantedClaim(bb, {});
    expect(await bidOf(bb, c)).toBe('exclusive');
  });
});

describe('after a run ends in error the pup backs off', () => {
  it('the runner gone: each retry waits longer (no hot loop); the runner back: the grant runs, nothing lost', async () => {
    const socket = join(ws, 'backoff-runner.sock');
    const runner = () => startRunnerServer({ socket, env: { PATH: process.env.PATH }, log: silentLogger() });
    let server = await runner();
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('pup', {}, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const pup = new Pup(
      config({
        REDIS_URL: redis.url,
        HOLT_INSTANCE_NAME: 'backoff',
        HOLT_WORKSPACE: ws,
        HOLT_TOOL_RUNNER_SOCKET: socket,
        HOLT_ERROR_BACKOFF_MS: '200',
      }),
      log,
    );
    pups.push(pup);
    await pup.start();
    await new Promise<void>((r) => server.close(() => r()));
    const bb = board('backoff');
    const { claim: c } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
    });
    await publishGrant(bb, 'coder', c.id, 'exclusive');
    const events = (t: string) => lines.filter((l) => l.event_type === t);
    await eventually('three pauses', async () => events('execution_backoff').length >= 3);
    const pauses = events('execution_backoff').slice(0, 3);
    expect(pauses.map((p) => p.errors_in_row)).toEqual([1, 2, 3]);
    // Each pause is at least half its nominal length (200, 400, 800 ms): never close to zero.
    for (const [i, p] of pauses.entries()) expect(p.delay_ms).toBeGreaterThanOrEqual(100 * 2 ** i);
    // A run only after a pause: without them this would be hundreds of runs by now.
    expect(events('execution_error').length).toBeLessThanOrEqual(events('execution_backoff').length + 1);
    server = await runner();
    const out = await outputOf(bb, c);
    expect(out.produced_by_role).toBe('coder');
    await new Promise<void>((r) => server.close(() => r()));
  });
});
