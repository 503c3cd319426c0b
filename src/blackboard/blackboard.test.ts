import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/harness/wait.ts';

import { Blackboard } from './client.ts';
import type { BlackboardDataError } from './codec.ts';
import { goMapJson } from './go-json.ts';
import { acquireLock, lockHolder, releaseLock } from './instance-lease.ts';
import { getAgents, setAgents } from './registry.ts';
import { failurePayload } from './results.ts';
import { subscribe } from './subscriber.ts';
import { artefact, claim, claimIdForArtefact, publishGrant, updateClaim, useBlackboard } from './testkit.ts';
import { Artefact } from './types.ts';

const { bb, redisUrl } = useBlackboard('test');

describe('blackboard: Holt byte compatibility', () => {
  it('stores an artefact as Holt hash fields and publishes its JSON', async () => {
    const sub = new Redis(redisUrl());
    const got = new Promise<string>((resolve) => sub.on('message', (_c, m) => resolve(m)));
    await sub.subscribe('holt:test:artefact_events');
    const a = artefact({ created_at_ms: 1730000000000 });
    expect((await bb().createArtefact(a)).created).toBe(true);
    const h = await bb().redis.hgetall(`holt:test:artefact:${a.id}`);
    expect(h).toEqual({
      id: a.id,
      logical_id: a.id,
      version: '1',
      structural_type: 'Standard',
      type: 'GoalDefined',
      payload: 'build it',
      source_artefacts: '[]',
      produced_by_role: 'user',
      created_at_ms: '1730000000000',
    });
    expect(JSON.parse(await got)).toEqual(a);
    expect(await bb().redis.zrevrange(`holt:test:thread:${a.id}`, 0, 0, 'WITHSCORES')).toEqual([a.id, '1']);
    sub.disconnect();
  });

  it('reads a hash written by Holt (nil slice as "null", bool as 1)', async () => {
    const id = randomUUID();
    await bb().redis.hset(`holt:test:artefact:${id}`, {
      id,
      logical_id: randomUUID(),
      version: '2',
      structural_type: 'Review',
      type: 'Review',
      payload: '{}',
      source_artefacts: 'null',
      produced_by_role: 'reviewer',
      created_at_ms: '5',
    });
    const a = await bb().getArtefact(id);
    expect(a?.source_artefacts).toEqual([]);
    expect(a?.version).toBe(2);
    const cid = randomUUID();
    await bb().redis.hset(`holt:test:claim:${cid}`, {
      id: cid,
      artefact_id: id,
      status: 'pending_exclusive',
      granted_review_agents: '[]',
      granted_parallel_agents: 'null',
      granted_exclusive_agent: 'coder',
      additional_context_ids: 'null',
      termination_reason: '',
      phase_state: JSON.stringify({
        current: 'exclusive',
        granted_agents: ['coder'],
        received: {},
        all_bids: { coder: 'exclusive' },
        start_time_ms: 1,
      }),
      grant_queue: '',
      last_grant_agent: '',
      last_grant_time: '0',
      artefact_expected: '1',
      granted_agent_image_id: '',
    });
    const c = await bb().getClaim(cid);
    expect(c?.rev).toBe(0);
    expect(c?.claim.phase_state?.current).toBe('exclusive');
    expect(c?.claim.artefact_expected).toBe(true);
  });

  it('artefacts are validated on write and write-once', async () => {
    await expect(bb().createArtefact({ ...artefact(), id: 'not-a-uuid' })).rejects.toThrow(/UUID/);
    await expect(bb().createArtefact({ ...artefact(), version: 0 })).rejects.toThrow(/version/);
    const a = artefact();
    await bb().createArtefact(a);
    const again = await bb().createArtefact({ ...a, payload: 'changed' });
    expect(again.created).toBe(false);
    expect((await bb().getArtefact(a.id))?.payload).toBe('build it');
  });

  it('a malformed stored item reads as missing and is reported once per read, with a clear reason; its siblings read', async () => {
    const seen: BlackboardDataError[] = [];
    const own = new Blackboard(bb().redis, 'test', { onMalformed: (e) => seen.push(e) });
    const id = randomUUID();
    const good = artefact();
    await own.createArtefact(good);
    await bb().redis.hset(`holt:test:artefact:${id}`, { id, version: 'x' });
    expect(await own.getArtefact(id)).toBeNull();
    expect((await own.getArtefacts([good.id, id])).map((a) => a?.id ?? null)).toEqual([good.id, null]);
    expect(seen.map((e) => [e.kind, e.id])).toEqual([
      ['artefact', id],
      ['artefact', id],
    ]);
    expect(seen[0]?.message).toMatch(new RegExp(`malformed artefact ${id} on the blackboard: .*version`));
    const cid = randomUUID();
    const okClaim = claim(good.id);
    await own.createClaim(okClaim);
    await bb().redis.hset(`holt:test:claim:${cid}`, { id: cid, granted_review_agents: '{not json' });
    expect(await own.getClaim(cid)).toBeNull();
    expect((await own.getClaims([cid, okClaim.id])).map((c) => c?.claim.id ?? null)).toEqual([
      null,
      okClaim.id,
    ]);
    expect(seen.slice(2).map((e) => e.kind)).toEqual(['claim', 'claim']);
    // Without a sink the blackboard keeps them for its owner to report.
    expect(await bb().getClaim(cid)).toBeNull();
    expect([...bb().malformed.keys()]).toContain(`claim:${cid}`);
    expect(seen.every((e) => e.reason.length <= 200)).toBe(true);
  });

  it('claim creation is idempotent per artefact; a feedback claim overwrites the index', async () => {
    const a = artefact();
    const c1 = claim(a.id);
    const c2 = claim(a.id);
    expect(await bb().createClaim(c1)).toEqual({ created: true, id: c1.id });
    expect(await bb().createClaim(c2)).toEqual({ created: false, id: c1.id });
    expect(await bb().getClaim(c2.id)).toBeNull();
    const fb = {
      ...claim(a.id),
      status: 'pending_assignment' as const,
      granted_exclusive_agent: 'coder',
    };
    expect((await bb().createClaim(fb, { overwriteIndex: true })).created).toBe(true);
    expect(await claimIdForArtefact(bb(), a.id)).toBe(fb.id);
  });

  it('claim updates are compare-and-set: two writers cannot both move a claim', async () => {
    const c = claim(artefact().id);
    await bb().createClaim(c);
    const read = (await bb().getClaim(c.id))!;
    const a = updateClaim(bb(), { ...read.claim, status: 'pending_parallel' }, read.rev);
    const b = updateClaim(bb(), { ...read.claim, status: 'pending_exclusive' }, read.rev);
    const results = await Promise.all([a, b]);
    expect(results.filter((r) => r !== null)).toHaveLength(1);
    const after = (await bb().getClaim(c.id))!;
    expect(after.rev).toBe(read.rev + 1);
    expect(await bb().activeClaimIds()).toContain(c.id);
    await updateClaim(bb(), { ...after.claim, status: 'complete' }, after.rev);
    expect(await bb().activeClaimIds()).not.toContain(c.id);
  });

  it('bids, grant notifications and workflow events use Holt shapes', async () => {
    const sub = new Redis(redisUrl());
    const msgs: [string, string][] = [];
    sub.on('message', (ch, m) => msgs.push([ch, m]));
    await sub.subscribe('holt:test:workflow_events', 'holt:test:agent:coder:events');
    const cid = randomUUID();
    await bb().setBid(cid, 'coder', 'exclusive');
    await publishGrant(bb(), 'coder', cid, 'exclusive');
    await eventually('both messages', () => msgs.length >= 2);
    expect(await bb().getBids(cid)).toEqual({ coder: 'exclusive' });
    expect(msgs.map(([c, m]) => [c, JSON.parse(m)])).toEqual([
      [
        'holt:test:workflow_events',
        { event: 'bid_submitted', data: { claim_id: cid, agent_name: 'coder', bid_type: 'exclusive' } },
      ],
      ['holt:test:agent:coder:events', { event_type: 'grant', claim_id: cid, claim_type: 'exclusive' }],
    ]);
    // Byte for byte as Holt's Go code writes them: map keys sorted, struct fields in order.
    expect(msgs.map(([, m]) => m)).toEqual([
      `{"event":"bid_submitted","data":{"agent_name":"coder","bid_type":"exclusive","claim_id":"${cid}"}}`,
      `{"claim_id":"${cid}","claim_type":"exclusive","event_type":"grant"}`,
    ]);
    sub.disconnect();
  });

  it('the lease admits one holder; another takes over after it expires', async () => {
    expect(await acquireLock(bb(), 'a', 200)).toBe(true);
    expect(await acquireLock(bb(), 'b', 200)).toBe(false);
    expect(await acquireLock(bb(), 'a', 200)).toBe(true);
    expect(await bb().redis.get('holt:test:lock')).toMatch(/^orchestrator:\d+$/);
    // b gets it once a's lease expires (a stopped renewing).
    await eventually('the lease to expire', () => acquireLock(bb(), 'b', 200));
    await releaseLock(bb(), 'a');
    expect(await lockHolder(bb())).toBe('b');
    await releaseLock(bb(), 'b');
    expect(await lockHolder(bb())).toBeNull();
  });

  it('the agent registry is replaced atomically and revisioned', async () => {
    const r1 = await setAgents(bb(), [
      { role: 'b', kind: 'standard' },
      { role: 'a', kind: 'scalable', worker_target: 'a' },
    ]);
    const got = await getAgents(bb());
    expect(got.rev).toBe(r1);
    expect(got.agents.map((a) => a.role)).toEqual(['a', 'b']);
    await expect(
      setAgents(bb(), [{ role: 'x', kind: 'scalable', worker_target: 'Bad.Token' }]),
    ).rejects.toThrow(/NATS subject token/);
  });

  it('the subscriber drops malformed messages without crashing', async () => {
    const good: unknown[] = [];
    const bad: string[] = [];
    const s = await subscribe(
      redisUrl(),
      ['holt:test:artefact_events'],
      Artefact,
      (m) => good.push(m),
      (_c, raw) => bad.push(raw),
    );
    await bb().redis.publish('holt:test:artefact_events', 'not json');
    await bb().redis.publish('holt:test:artefact_events', '{"id":"x"}');
    const a = artefact();
    await bb().createArtefact(a);
    // Delivered in publish order: once the good one is in, both bad ones were handled before it.
    await eventually('the valid message', () => good.length >= 1);
    expect(bad).toEqual(['not json', '{"id":"x"}']);
    expect(good).toEqual([a]);
    await s.close();
  });
});

describe("Holt's channel carries only Holt's events", () => {
  it('our own events go to workflow_events_ext, where Holt never listens', async () => {
    const sub = new Redis(redisUrl());
    const got: [string, string][] = [];
    sub.on('message', (ch, m) => got.push([ch, JSON.parse(m).event]));
    await sub.subscribe('holt:test:workflow_events', 'holt:test:workflow_events_ext');
    await bb().publishWorkflowEvent({
      event: 'bid_timeout',
      data: { claim_id: randomUUID(), silent_agents: ['x'], timeout_ms: 5 },
    });
    await bb().publishWorkflowEvent({
      event: 'review_approved',
      data: { original_artefact_id: randomUUID(), reviewer_role: 'r' },
    });
    await eventually('both events', () => got.length >= 2);
    expect(got).toEqual([
      ['holt:test:workflow_events_ext', 'bid_timeout'],
      ['holt:test:workflow_events', 'review_approved'],
    ]);
    sub.disconnect();
  });
});

describe("Go's bytes where the protocol is Holt's", () => {
  it('a failure payload omits what Go omits (empty stdout, stderr, exit code 0) and escapes as Go does', () => {
    expect(
      failurePayload({ reason: 'tool produced no output on stdout', exit_code: 0, stdout: '', stderr: '' }),
    ).toBe(
      '{\n  "reason": "tool produced no output on stdout",\n  "error": "tool produced no output on stdout"\n}',
    );
    expect(
      failurePayload({ reason: 'process exited with code 2', exit_code: 2, stdout: '', stderr: 'a<b & c>d' }),
    ).toBe(
      '{\n  "reason": "process exited with code 2",\n  "exit_code": 2,\n  "stderr": "a\\u003cb \\u0026 c\\u003ed",\n  "error": "process exited with code 2"\n}',
    );
    // Our extension comes last, only when the class is known: Holt's readers see their fields unchanged.
    expect(failurePayload({ reason: 'r', exit_code: 2, stdout: '', stderr: '', error_class: 'tool' })).toBe(
      '{\n  "reason": "r",\n  "exit_code": 2,\n  "error": "r",\n  "error_class": "tool"\n}',
    );
  });

  it('map keys sorted at every level; arrays keep their order', () => {
    expect(goMapJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: '<' } })).toBe(
      '{"a":{"c":"\\u003c","d":[{"y":2,"z":1}]},"b":1}',
    );
  });
});
