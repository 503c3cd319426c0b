import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type Monitored, monitorCommands } from '../../test/harness/redis-monitor.ts';
import { eventually } from '../../test/harness/wait.ts';
import { readAgentLoad } from '../blackboard/agent-load.ts';
import { Blackboard } from '../blackboard/client.ts';
import { readQuarantine } from '../blackboard/quarantine.ts';
import { setAgents } from '../blackboard/registry.ts';
import { claimSnapshotScript, updateClaimsScript } from '../blackboard/scripts.ts';
import type { Claim } from '../blackboard/types.ts';
import type { Grant, GrantDispatcher } from './dispatch.ts';
import type { Orchestrator } from './orchestrator.ts';
import { assertNoDuplicateGrant, onGoal, resilienceKit, threePhase } from './resilience.testkit.ts';
import {
  type AgentScript,
  claimFor,
  newGoal,
  register,
  ScriptedAgent,
  startOrchestrator,
  waitClaim,
} from './testkit.ts';

const { redis, setup, cleanups } = resilienceKit();

describe('orchestrator resilience: restarts, crashes, bad data, load', () => {
  it('docs/protocol.md row 35: restart recovery', async () => {
    const par2Hold: AgentScript = { role: 'Par2', bid: onGoal('claim'), respond: () => ({ type: 'Part2' }) };
    const { bb, rec, agents, start } = await setup([...threePhase, par2Hold], ['Idle']);
    await setAgents(
      bb,
      ['Reviewer', 'Par', 'Coder', 'Par2'].map((role) => ({ role, kind: 'standard' as const })),
    );
    const par2 = agents[3] as ScriptedAgent;
    par2.pause();
    const o1 = start();
    await o1.whenLeader();
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await claimFor(bb, g.id);
    await waitClaim(
      bb,
      c.id,
      (x) => x.phase_state?.current === 'parallel' && x.phase_state.received.Par !== undefined,
    );
    await o1.stop();

    // While it is down: Par2's output arrives, a new goal arrives, and a Holt-style paused grant exists.
    await par2.release();
    await eventually('Par2 output', () => par2.outputs.length === 1);
    const g2 = newGoal();
    await bb.createArtefact(g2);
    const queuedGoal = newGoal('queued');
    await bb.createArtefact(queuedGoal);
    const queued: Claim = {
      id: randomUUID(),
      artefact_id: queuedGoal.id,
      status: 'pending_exclusive',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: '',
      grant_queue: { paused_at_ms: Date.now(), agent_name: 'Coder', position: 0 },
      phase_state: {
        current: 'exclusive',
        granted_agents: [''],
        received: {},
        all_bids: { Coder: 'exclusive' },
        start_time_ms: Date.now(),
      },
    };
    await bb.createClaim(queued);
    await bb.redis.zadd(bb.k.grantQueue('Coder'), Date.now(), queued.id);

    const o2 = start();
    await o2.whenLeader();
    await waitClaim(bb, c.id, (x) => x.status === 'complete', 'the interrupted claim completes');
    await waitClaim(
      bb,
      (await claimFor(bb, g2.id)).id,
      (x) => x.status === 'complete',
      'the goal made while down',
    );
    const q = await waitClaim(bb, queued.id, (x) => x.status === 'complete', 'the queued grant drains');
    expect(q.granted_exclusive_agent).toBe('Coder');
    expect(await bb.redis.zcard(bb.k.grantQueue('Coder'))).toBe(0);
    assertNoDuplicateGrant(rec);
  });

  it('docs/protocol.md row 35: a restart re-announces a grant still lacking output and keeps dormant claims', async () => {
    const { bb, rec, agents, start } = await setup([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
      { role: 'Idle', bid: () => 'ignore' },
    ]);
    const coder = agents[0] as ScriptedAgent;
    coder.pause();
    const o1 = start();
    await o1.whenLeader();
    const note = newGoal('n', { type: 'Note' });
    await bb.createArtefact(note);
    const dormant = await waitClaim(
      bb,
      (await claimFor(bb, note.id)).id,
      (x) => x.dormant_reason !== undefined,
    );
    // A dormant claim needs no bids and no execution: it leaves the active set the pups re-read.
    expect(await bb.activeClaimIds()).not.toContain(dormant.id);
    expect(await bb.dormantClaimIds()).toEqual([dormant.id]);
    // One made dormant before the dormant set existed (still in the active set) is moved on restart.
    const legacy = newGoal('legacy', { type: 'Note' });
    await bb.createArtefact(legacy);
    const old = await waitClaim(
      bb,
      (await claimFor(bb, legacy.id)).id,
      (x) => x.dormant_reason !== undefined,
    );
    await bb.redis.smove(bb.k.dormantClaims, bb.k.activeClaims, old.id);
    const g = newGoal();
    await bb.createArtefact(g);
    const c = await waitClaim(
      bb,
      (await claimFor(bb, g.id)).id,
      (x) => x.granted_exclusive_agent === 'Coder',
    );
    await eventually('the first notification', () => coder.grants.length === 1);
    o1.halt();
    // The agent lost its queued work (say it restarted): only the re-announcement can bring it back.
    coder.drop();
    const o2 = start();
    await o2.whenLeader();
    await eventually('the re-announcement', () => coder.grants.length >= 2);
    await waitClaim(bb, c.id, (x) => x.status === 'complete');
    expect(rec.events('claim_granted').filter((d) => d.claim_id === c.id)).toHaveLength(1);
    // Dormant claims are reported, not terminated, by recovery (Holt terminated them).
    const after = (await bb.getClaim(dormant.id))?.claim;
    expect(after?.status).toBe('pending_review');
    expect(after?.dormant_reason).toBe('no_bids_in_any_phase');
    expect(await bb.activeClaimIds()).not.toContain(old.id);
    expect(await bb.dormantClaimIds()).toEqual(expect.arrayContaining([dormant.id, old.id]));
  });

  it('crash between any two steps: the workflow completes after restart with no duplicate grant', async () => {
    // Count the step boundaries of one clean run, then crash at each one in turn.
    const count = async (): Promise<number> => {
      const { bb, start } = await setup(threePhase);
      let n = 0;
      const o = start({}, { onStep: () => void n++ });
      await o.whenLeader();
      const g = newGoal();
      await bb.createArtefact(g);
      await waitClaim(bb, (await claimFor(bb, g.id)).id, (x) => x.status === 'complete');
      await o.stop();
      return n;
    };
    const boundaries = await count();
    expect(boundaries).toBeGreaterThan(5);
    for (let k = 1; k <= boundaries; k++) {
      const { bb, rec, start } = await setup(threePhase);
      let n = 0;
      let crashed = false;
      const victim: Orchestrator = start(
        { leaseTtlMs: 300 },
        {
          onStep: (name) => {
            if (++n === k) {
              crashed = true;
              victim.halt();
              throw new Error(`crash injected at ${name}`);
            }
          },
        },
      );
      await victim.whenLeader();
      const g = newGoal();
      await bb.createArtefact(g);
      await eventually(`crash ${k}`, () => crashed);
      const heir = start({ leaseTtlMs: 300 });
      await heir.whenLeader();
      const c = await waitClaim(
        bb,
        (await claimFor(bb, g.id)).id,
        (x) => x.status === 'complete',
        `complete after crash ${k}`,
      );
      expect(c.granted_exclusive_agent).toBe('Coder');
      assertNoDuplicateGrant(rec);
      await heir.stop();
      for (const fn of cleanups.splice(0).reverse()) await fn();
    }
  });

  it('the registry is runtime data: a change applies to new claims without a restart', async () => {
    const { bb, start, agents } = await setup([
      { role: 'Coder', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
      { role: 'Extra', bid: onGoal('exclusive'), respond: () => ({ type: 'Code' }) },
    ]);
    await setAgents(bb, [{ role: 'Coder', kind: 'standard' }]);
    const o = start({ bidTimeoutMs: 60_000 });
    await o.whenLeader();
    const g1 = newGoal();
    await bb.createArtefact(g1);
    const c1 = await waitClaim(bb, (await claimFor(bb, g1.id)).id, (x) => x.status === 'complete');
    expect(c1.expected_bidders).toEqual(['Coder']);
    expect(c1.granted_exclusive_agent).toBe('Coder');

    // Register Extra (byte-wise first): new claims wait for it and it wins the tie.
    await setAgents(bb, [
      { role: 'Coder', kind: 'standard' },
      { role: 'Extra', kind: 'standard' },
      { role: 'Aaa', kind: 'standard' },
    ]);
    const g2 = newGoal();
    await eventually('the new registry', async () => {
      // The change notification is asynchronous; a claim made before it still uses the old snapshot.
      const probe = newGoal();
      await bb.createArtefact(probe);
      return (await claimFor(bb, probe.id)).expected_bidders?.includes('Aaa');
    });
    await bb.createArtefact(g2);
    const c2 = await claimFor(bb, g2.id);
    expect(c2.expected_bidders).toEqual(['Aaa', 'Coder', 'Extra']);
    // Aaa never bids: the claim waits (consensus is on the snapshot), and a bid releases it.
    await eventually('two bids', async () => Object.keys(await bb.getBids(c2.id)).length === 2);
    expect((await bb.getClaim(c2.id))?.claim.phase_state ?? null).toBeNull();
    await bb.setBid(c2.id, 'Aaa', 'ignore');
    const done = await waitClaim(bb, c2.id, (x) => x.status === 'complete');
    expect(done.granted_exclusive_agent).toBe('Coder');
    expect(agents[1]?.grants.length ?? 0).toBe(0);
  });

  it('bad data never stops a leader: malformed claims and artefacts are quarantined once, reported, and the rest runs', async () => {
    const { bb, rec, start } = await setup([
      {
        role: 'Coder',
        bid: onGoal('exclusive'),
        respond: () => ({ structural_type: 'Terminal', type: 'Done' }),
      },
    ]);
    const k = bb.k;
    // Before any leader: a poison claim in the active set and one in the dormant set, an indexed
    // artefact that does not parse, and a goal one of whose children does not parse.
    const [poison, dormant, badArtefact, badChild] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    await bb.redis.hset(k.claim(poison), {
      id: poison,
      artefact_id: randomUUID(),
      granted_review_agents: '{x',
    });
    await bb.redis.sadd(k.activeClaims, poison);
    await bb.redis.hset(k.claim(dormant), { id: dormant, status: 'no-such-status' });
    await bb.redis.sadd(k.dormantClaims, dormant);
    await bb.redis.hset(k.artefact(badArtefact), { id: badArtefact, version: 'one' });
    await bb.redis.zadd(k.artefactIndex, Date.now(), badArtefact);
    const g = newGoal('with a bad child');
    await bb.createArtefact(g);
    await bb.redis.hset(k.artefact(badChild), { id: badChild, source_artefacts: '[' });
    await bb.redis.sadd(k.children(g.id), badChild);
    const o = start();
    await o.whenLeader(); // recovery finished: the poison did not stop it
    await waitClaim(bb, (await claimFor(bb, g.id)).id, (c) => c.status === 'complete', 'the goal completes');
    // A poison claim that appears while the leader runs is met by the next reconcile pass.
    const late = randomUUID();
    await bb.redis.hset(k.claim(late), { id: late, rev: 'x', granted_parallel_agents: 'nope' });
    await bb.redis.sadd(k.activeClaims, late);
    const want = [
      `artefact:${badArtefact}`,
      `artefact:${badChild}`,
      `claim:${dormant}`,
      `claim:${late}`,
      `claim:${poison}`,
    ];
    const listed = await eventually('every bad item quarantined', async () => {
      const q = await readQuarantine(bb);
      const keys = q.map((x) => `${x.kind}:${x.id}`).sort();
      return want.every((w) => keys.includes(w)) ? q : null;
    });
    expect(listed.every((q) => q.reason === 'malformed' && (q.detail ?? '').length > 0)).toBe(true);
    expect(await bb.redis.smembers(k.activeClaims)).not.toContain(poison);
    expect(await bb.redis.sismember(k.activeClaims, late)).toBe(0);
    expect(await bb.redis.sismember(k.dormantClaims, dormant)).toBe(0);
    await o.quarantine.settled();
    // A new leader reads everything again (recovery and a first full pass) and reports nothing twice.
    await o.stop();
    const next = start();
    await next.whenLeader();
    await next.quarantine.settled();
    await eventually('the events', async () => rec.events('quarantined').length >= want.length);
    const reported = rec.events('quarantined').map((d) => `${d.kind}:${d.id}`);
    expect(reported.sort()).toEqual([...want].sort());
    const counted = (await o.metrics.quarantined.get()).values.filter((v) => v.labels.reason === 'malformed');
    expect(counted.reduce((n, v) => n + v.value, 0)).toBe(want.length);
  });

  it("the leader publishes each role's open grants (agent_load); the next leader carries on", async () => {
    const { bb, start, agents } = await setup(threePhase);
    const par = agents[1];
    if (!par) throw new Error('Par agent expected');
    par.pause(); // the parallel grant stays open
    const o = start({ loadIntervalMs: 50 });
    await o.whenLeader();
    const goals = [newGoal('a'), newGoal('b')];
    for (const g of goals) await bb.createArtefact(g);
    const load = () => readAgentLoad(bb.redis, bb.k.agentLoad);
    await eventually('Par holds two open grants', async () => (await load())?.in_flight.Par === 2);
    expect((await load())?.in_flight).toEqual({ Par: 2 });
    await par.release();
    await eventually('no open grant', async () => {
      const l = await load();
      return l && Object.keys(l.in_flight).length === 0;
    });
    for (const g of goals) await waitClaim(bb, (await claimFor(bb, g.id)).id, (c) => c.status === 'complete');
    await o.stop();
    const last = (await load())?.updated_at_ms;
    await bb.redis.del(bb.k.agentLoad);
    const other = start({ loadIntervalMs: 50 });
    await other.whenLeader();
    await eventually(
      'the new leader publishes',
      async () => ((await load())?.updated_at_ms ?? 0) > (last ?? 0),
    );
  });

  it('grants to scalable roles go to the injected dispatcher', async () => {
    const handed: Grant[] = [];
    const pool: GrantDispatcher = {
      async dispatch(g) {
        handed.push(g);
      },
    };
    const { bb, start } = await setup([{ role: 'Coder', bid: onGoal('exclusive') }]);
    await setAgents(bb, [{ role: 'Coder', kind: 'scalable', worker_target: 'coder' }]);
    const o = start({}, { scalableDispatcher: pool });
    await o.whenLeader();
    await eventually('a scalable grant', async () => {
      const g = newGoal();
      await bb.createArtefact(g);
      const c = await claimFor(bb, g.id);
      return (await waitClaim(bb, c.id, (x) => x.phase_state !== undefined)).granted_exclusive_agent ===
        'Coder'
        ? handed.length > 0
        : false;
    });
    expect(handed[0]).toMatchObject({
      role: 'Coder',
      claimType: 'exclusive',
      phase: 'exclusive',
      reason: 'grant',
    });
    expect(handed[0]?.claim.granted_exclusive_agent).toBe('Coder');
  });

  it('a claim of ten bids, a grant and a completion costs one step read, and never the claim hash written here', async () => {
    const instance = `reads${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, instance);
    const roles = Array.from({ length: 10 }, (_, i) => `agent${i}`);
    await register(bb, roles);
    const agents = await Promise.all(
      roles.map((role) =>
        ScriptedAgent.start(redis.url, instance, {
          role,
          bid: () => (role === 'agent0' ? 'exclusive' : 'ignore'),
          respond: () => ({ structural_type: 'Terminal', type: 'Done' }),
        }),
      ),
    );
    // No poll and no reconcile pass during the test: every read is one the claim's events asked for.
    const orch = startOrchestrator(redis.url, instance, { bidPollMs: 600_000, reconcileIntervalMs: 600_000 });
    await orch.whenLeader();
    const seen: Monitored[] = [];
    const monitor = await monitorCommands(bb.redis, seen);
    const commands = () => seen.filter((m) => !m.fromScript).map((m) => m.args);
    const fromScripts = () => seen.filter((m) => m.fromScript).map((m) => m.args);
    try {
      const g = newGoal();
      await bb.createArtefact(g);
      const c = await claimFor(bb, g.id);
      await waitClaim(bb, c.id, (x) => x.status === 'complete');
      const claimKey = bb.k.claim(c.id);
      const calls = (sha: string) =>
        commands().filter((a) => a[0]?.toLowerCase() === 'evalsha' && a[1] === sha && a[3] === claimKey);
      // The monitor stream is in order: once it shows the completing write, every read before it is in.
      await eventually('the grant and the completion', () => calls(updateClaimsScript.sha).length >= 2);
      const snapshots = () => calls(claimSnapshotScript.sha);
      // The first step decides on the claim as created (no read); one read before the grant (after
      // the last bid); the completion decides on what the output's own script read (its claim's rev
      // and the goal's children).
      expect(snapshots()).toHaveLength(1);
      // Every read found the claim at the rev this orchestrator wrote, so its hash never came back
      // (the reads checked the rev alone; the agents' own reads are not scripts).
      const inScripts = (cmd: string) =>
        fromScripts().filter((a) => a[0]?.toLowerCase() === cmd && a[1] === claimKey);
      expect(inScripts('hgetall')).toEqual([]);
    } finally {
      monitor.disconnect();
      await orch.stop();
      for (const a of agents) await a.stop();
      await bb.close();
    }
  });
});
