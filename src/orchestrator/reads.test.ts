import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { Blackboard } from '../blackboard/client.ts';
import { claimSnapshotScript, updateClaimScript } from '../blackboard/scripts.ts';
import {
  claimFor,
  newGoal,
  register,
  ScriptedAgent,
  startOrchestrator,
  waitClaim,
  waitFor,
} from './testkit.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe('what a claim costs in reads', () => {
  it('ten bids, a grant and a completion: two step reads, and never the claim hash it wrote itself', async () => {
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
    const monitor: Redis = await bb.redis.duplicate().monitor();
    const commands: string[][] = [];
    const fromScripts: string[][] = [];
    monitor.on('monitor', (_t: string, args: string[], source: string) =>
      (source === 'lua' ? fromScripts : commands).push(args),
    );
    try {
      const g = newGoal();
      await bb.createArtefact(g);
      const c = await claimFor(bb, g.id);
      await waitClaim(bb, c.id, (x) => x.status === 'complete');
      const claimKey = bb.k.claim(c.id);
      const calls = (sha: string) =>
        commands.filter((a) => a[0]?.toLowerCase() === 'evalsha' && a[1] === sha && a[3] === claimKey);
      // The monitor stream is in order: once it shows the completing write, every read before it is in.
      await waitFor(() => calls(updateClaimScript.sha).length >= 2, 'the grant and the completion');
      const snapshots = () => calls(claimSnapshotScript.sha);
      // The first step decides on the claim as created (no read); one read before the grant (after
      // the last bid) and one before the completion (after the output).
      expect(snapshots()).toHaveLength(2);
      // Both found the claim at the rev this orchestrator wrote, so its hash never came back (the
      // reads checked the rev alone; the agents' own reads are not scripts).
      const inScripts = (cmd: string) =>
        fromScripts.filter((a) => a[0]?.toLowerCase() === cmd && a[1] === claimKey);
      expect(inScripts('hgetall')).toEqual([]);
    } finally {
      monitor.disconnect();
      await orch.stop();
      for (const a of agents) await a.stop();
      await bb.close();
    }
  });
});
