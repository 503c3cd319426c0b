import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube } from '../../../test/harness/kube.ts';
import { type RedisServer, startRedis } from '../../../test/harness/redis.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { newPasswords } from '../../access/principals.ts';
import { redisAclLines, redisUrl } from '../../access/redis.ts';
import { writeAgentLoad } from '../../blackboard/agent-load.ts';
import {
  type AgentStatus as LlmAgentStatus,
  writeAgentStatus,
  writeMemoryStatus,
} from '../../blackboard/agent-status.ts';
import { Blackboard } from '../../blackboard/client.ts';
import { outputId } from '../../blackboard/grants.ts';
import { type McpStatusReport, writeMcpStatus } from '../../blackboard/mcp-status.ts';
import { quarantineItem } from '../../blackboard/quarantine.ts';
import { NO_PRUNE, writeRetentionReport } from '../../blackboard/retention-report.ts';
import { updateClaim } from '../../blackboard/testkit.ts';
import type { Claim, ClaimType } from '../../blackboard/types.ts';
import { freePort } from '../../local/ports.ts';
import { publishLoad } from '../../orchestrator/load.ts';
import { claim as newClaim, phaseState as phase } from '../../pup/testkit.ts';
import { KubeClient, type KubeObject } from '../kube/kube.ts';
import type { Operator } from '../operator.ts';
import { agentObject, holtObject, installCrds, startOperator } from '../testkit.ts';
import {
  type AgentFigures,
  budgetOf,
  type HoltFiguresReader,
  LOAD_STALE_MS,
  mcpServerNote,
  mcpServersOf,
  memoryOf,
  RedisFiguresReader,
} from './agentfigures.ts';
import { HoltBoards, type HoltRef, RedisRegistryWriter } from './registry.ts';

// Agent status from the Holt's Redis: claims in flight for the role (as the leader publishes them)
// and the LLM pup's budget use, read as the operator's own Redis user.
const NS = 'agent-status';
const HOLT = 'rt';
const ROLE = 'coder';
/** An LLM agent with two inline MCP servers. */
const WRITER = 'writer';

const claim = (over: Partial<Claim>): Claim => newClaim(randomUUID(), over);

describe('pure: budget mapping', () => {
  it('budgetOf: counts, cost, paused; the window start as of the last write', () => {
    const s = llmStatus({ state: 'paused', window_ms: 60_000, updated_at_ms: Date.UTC(2025, 0, 1, 0, 1) });
    expect(budgetOf(s)).toEqual({
      windowStart: '2025-01-01T00:00:00Z',
      calls: 3,
      tokens: 1200,
      costUsd: 0.25,
      paused: true,
    });
    expect(budgetOf({ ...s, window_ms: 0 }).windowStart).toBeUndefined();
  });
  it('memoryOf: the counts when the hash has them, nothing for an agent without a memory', () => {
    expect(memoryOf(llmStatus())).toBeUndefined();
    expect(memoryOf(llmStatus({ memories: 3, memory_recalls: 7 }))).toEqual({ memories: 3, recalls: 7 });
  });
});

describe('pure: MCP servers of the status', () => {
  it('the spec order; a server the report lacks is not reported yet and not named as down', () => {
    const r = {
      updated_at_ms: 1,
      servers: [
        {
          name: 'b',
          state: 'unreachable' as const,
          tools: [],
          reason: 'cannot connect (ECONNREFUSED)',
          since_ms: 0,
        },
        { name: 'a', state: 'connecting' as const, tools: [], since_ms: 0 },
      ],
    };
    const ms = mcpServersOf(r, ['a', 'b', 'new']);
    expect(ms).toEqual([
      { name: 'a', ready: false, message: 'connecting' },
      { name: 'b', ready: false, message: 'unreachable: cannot connect (ECONNREFUSED)' },
      { name: 'new', ready: false, message: 'not reported by its pup yet' },
    ]);
    expect(mcpServerNote(ms)).toBe('; MCP server b unreachable: cannot connect (ECONNREFUSED)');
  });
});

function llmStatus(over: Partial<LlmAgentStatus> = {}): LlmAgentStatus {
  return {
    state: 'active',
    paused_reason: '',
    paused_class: '',
    paused_until_ms: 0,
    model: 'm',
    calls_in_window: 3,
    tokens_in_window: 1200,
    window_ms: 60_000,
    calls_limit: 10,
    tokens_limit: 10_000,
    cost_usd_total: 0.25,
    cost_usd_limit: 5,
    consecutive_errors: 0,
    updated_at_ms: Date.UTC(2025, 0, 1, 0, 1),
    life_state: '',
    items_runnable: 0,
    items_waiting: 0,
    items_blocked: 0,
    items_completed: 0,
    last_message_at_ms: 0,
    memory_recalls: 0,
    ...over,
  };
}

let kube: KubeCluster;
let redis: RedisServer;
let admin: KubeClient;
let op: Operator;
let bb: Blackboard;
/** The Holt's Redis as the pups' user: what an LLM pup publishes, it publishes as that. */
let asPup: Blackboard;
let deadUrl: string;
let down = false;
/** Successful runtime reads: a positive signal that polls happened (no timed waits). */
let reads = 0;

type Status = {
  claimsInFlight?: number;
  budget?: Record<string, unknown>;
  memory?: { memories: number; recalls: number };
  conditions?: { type: string; status: string; message: string }[];
};
const agentStatus = async () => ((await admin.get('Agent', NS, 'rt-coder'))?.status ?? {}) as Status;
const inFlightIs = (n: number) =>
  eventually(`claimsInFlight ${n}`, async () =>
    (await agentStatus()).claimsInFlight === n ? true : undefined,
  );
/** What the orchestrator's leader does every HOLT_LOAD_INTERVAL_MS (src/orchestrator/load.ts). */
const published = () => publishLoad(bb, () => true);
const readsAfter = (n: number) => {
  const want = reads + n;
  return eventually(`${n} more runtime reads`, () => (reads >= want ? true : undefined));
};
const output = (c: Claim, type: ClaimType) =>
  bb.createArtefact({
    id: outputId(HOLT, c.id, ROLE, type),
    logical_id: randomUUID(),
    version: 1,
    structural_type: 'Standard',
    type: 'Code',
    payload: 'done',
    source_artefacts: [c.artefact_id],
    produced_by_role: ROLE,
  });

beforeAll(async () => {
  const pw = newPasswords();
  [kube, redis] = await Promise.all([
    startKube(),
    startRedis({ acl: redisAclLines(HOLT, pw), adminPassword: pw.admin }),
  ]);
  deadUrl = `redis://127.0.0.1:${await freePort()}`; // nobody listens there
  admin = new KubeClient(kube.kubeconfig);
  await installCrds(admin);
  await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  bb = Blackboard.connect(redis.url, HOLT);
  asPup = Blackboard.connect(redisUrl('pup', pw.pup, '127.0.0.1', redis.port), HOLT);
  const asOperator = redisUrl('operator', pw.operator, '127.0.0.1', redis.port);
  const boards = new HoltBoards(async () => (down ? deadUrl : asOperator));
  const real = new RedisFiguresReader(boards, { maxAgeMs: 0 });
  const runtime: HoltFiguresReader = {
    read: async (h: HoltRef, role: string): Promise<AgentFigures> => {
      const r = await real.read(h, role);
      reads++;
      return r;
    },
    readHolt: (h: HoltRef) => real.readHolt(h),
    close: () => real.close(),
  };
  op = await startOperator(kube, NS, {
    registry: new RedisRegistryWriter(boards),
    runtime,
    statusPollMs: 150,
    resyncMs: 60_000,
  });
  await admin.create(holtObject(NS, HOLT));
  await admin.create<KubeObject>(
    agentObject(NS, 'rt-coder', {
      holt: HOLT,
      role: ROLE,
      command: ['/app/run.sh'],
      bidding: { strategy: 'claim' },
    }),
  );
  await admin.create<KubeObject>(
    agentObject(NS, 'rt-writer', {
      holt: HOLT,
      role: WRITER,
      bidding: { strategy: 'exclusive' },
      llm: {
        model: 'm',
        mcpServers: [
          { name: 'tiny', command: ['node', 'tiny-server.mjs'] },
          { name: 'broken', command: ['/nonexistent/mcp-server'] },
        ],
      },
    }),
  );
});

afterAll(async () => {
  await op?.stop();
  await bb?.close();
  await asPup?.close();
  admin?.close();
  await Promise.all([kube?.stop(), redis?.stop()]);
});

describe('Agent status from the Holt Redis (real API server + real Redis)', () => {
  const granted: { c: Claim; type: ClaimType }[] = [];

  it('claims granted to the role → claimsInFlight N; outputs → back to 0', async () => {
    await inFlightIs(0);
    const mine = [
      {
        c: claim({
          status: 'pending_parallel',
          granted_parallel_agents: [ROLE, 'tester'],
          phase_state: phase('parallel', [ROLE, 'tester']),
        }),
        type: 'claim' as const,
      },
      {
        c: claim({ status: 'pending_exclusive', granted_exclusive_agent: ROLE }),
        type: 'exclusive' as const,
      },
      // A feedback claim: the producer's rework.
      {
        c: claim({ status: 'pending_assignment', granted_exclusive_agent: ROLE }),
        type: 'exclusive' as const,
      },
    ];
    granted.push(...mine);
    const others = [
      claim({ status: 'pending_review', granted_review_agents: ['reviewer'] }),
      claim({ status: 'pending_exclusive', granted_review_agents: [ROLE], granted_exclusive_agent: 'x' }),
      claim({ status: 'pending_exclusive', granted_exclusive_agent: ROLE, dormant_reason: 'nothing left' }),
    ];
    for (const c of [...mine.map((m) => m.c), ...others]) await bb.createClaim(c);
    await published();
    await inFlightIs(3);
    const [first, second, third] = granted;
    if (!first || !second || !third) throw new Error('three grants expected');
    await output(first.c, first.type);
    await published();
    await inFlightIs(2);
    await output(second.c, second.type);
    // The orchestrator completes the third (removed from the active set).
    const vc = await bb.getClaim(third.c.id);
    if (!vc) throw new Error('claim missing');
    await updateClaim(bb, { ...vc.claim, status: 'complete' }, vc.rev);
    await published();
    await inFlightIs(0);
  });

  it('a load no leader has refreshed for a minute is shown with a note, and the note goes with a fresh one', async () => {
    await writeAgentLoad(bb.redis, bb.k.agentLoad, {
      updated_at_ms: Date.now() - LOAD_STALE_MS - 1_000,
      in_flight: { [ROLE]: 7 },
    });
    const ready = () => agentStatus().then((s) => s.conditions?.find((x) => x.type === 'Ready'));
    await inFlightIs(7);
    await eventually('stale note', async () =>
      (await ready())?.message.includes('for a minute') ? true : undefined,
    );
    await published();
    await inFlightIs(0);
    await eventually('note gone', async () => {
      const r = await ready();
      return r && !r.message.includes('not refreshed') ? true : undefined;
    });
  });

  it('an agent_status hash → status.budget; a change in it → a new budget', async () => {
    await writeAgentStatus(bb.redis, HOLT, ROLE, llmStatus());
    const st = await eventually('budget', async () => {
      const s = await agentStatus();
      return s.budget ? s : undefined;
    });
    expect(st.budget).toEqual({
      windowStart: '2025-01-01T00:00:00Z',
      calls: 3,
      tokens: 1200,
      costUsd: 0.25,
      paused: false,
    });
    await writeAgentStatus(bb.redis, HOLT, ROLE, llmStatus({ state: 'paused', calls_in_window: 4 }));
    await eventually('paused budget', async () => {
      const b = (await agentStatus()).budget;
      return b?.paused === true && b.calls === 4 ? true : undefined;
    });
  });

  it("the pup's memory counts → status.memory, beside the budget", async () => {
    expect((await agentStatus()).memory).toBeUndefined(); // no memory fields in the hash yet
    await writeMemoryStatus(asPup.redis, HOLT, ROLE, { memories: 4, memory_recalls: 9 }); // as its pup
    const st = await eventually('status.memory', async () => {
      const s = await agentStatus();
      return s.memory?.memories === 4 ? s : undefined;
    });
    expect(st.memory).toEqual({ memories: 4, recalls: 9 });
    expect(st.budget).toMatchObject({ calls: 4 });
  });

  it('Holt status: the quarantine count and the retention report; more quarantined items are a Warning event', async () => {
    type HoltData = { quarantined?: number; retention?: Record<string, unknown> };
    const holtData = async () =>
      ((await admin.get('Holt', NS, HOLT))?.status as { data?: HoltData } | undefined)?.data;
    await eventually('an empty quarantine', async () =>
      (await holtData())?.quarantined === 0 ? true : undefined,
    );
    expect((await holtData())?.retention).toBeUndefined(); // no pass yet
    await quarantineItem(bb, { kind: 'claim', id: 'c-bad', reason: 'malformed', detail: 'status: invalid' });
    await quarantineItem(bb, { kind: 'artefact', id: 'a-bad', reason: 'malformed', detail: 'version: NaN' });
    await writeRetentionReport(bb.redis, bb.k.retention, {
      days: 7,
      last_pass_ms: Date.UTC(2026, 10, 25, 12),
      duration_ms: 40,
      last: { ...NO_PRUNE, workflows: 1 },
      total: { ...NO_PRUNE, workflows: 5, artefacts: 40, claims: 20, turns: 7 },
      kept: {},
    });
    const data = await eventually('quarantine and retention in the Holt status', async () => {
      const d = await holtData();
      return d?.quarantined === 2 && d.retention ? d : undefined;
    });
    expect(data.retention).toEqual({
      days: 7,
      lastPassTime: '2026-11-25T12:00:00Z',
      removedWorkflows: 5,
      removedArtefacts: 40,
      removedTurns: 7,
    });
    // One event, or two when a poll fell between the two quarantine writes: the last says 2 in all.
    const notes = await eventually('a DataQuarantined event for both items', async () => {
      const ev = (await admin.list('Event', NS)).items.filter((e) => e.reason === 'DataQuarantined');
      const n = ev.map((e) => String((e as { note?: string }).note));
      return n.some((x) => x.includes('(2 in all)')) ? n : undefined;
    });
    expect(notes.length).toBeLessThanOrEqual(2);
    expect(notes.every((x) => /^[12] more stored item\(s\) set aside/.test(x))).toBe(true);
  });

  it("the pup's MCP report → status.mcpServers; a down server is named in Ready's message without degrading the agent", async () => {
    type Mcp = { name: string; ready: boolean; message: string; tools?: string[]; lastChangeTime?: string };
    type St = {
      mcpServers?: Mcp[];
      conditions?: { type: string; status: string; reason: string; message: string }[];
    };
    const writer = async () => ((await admin.get('Agent', NS, 'rt-writer'))?.status ?? {}) as St;
    const at = Date.UTC(2026, 10, 26, 23, 0);
    const report = (broken: McpStatusReport['servers'][number]): McpStatusReport => ({
      updated_at_ms: at,
      servers: [
        { name: 'tiny', state: 'connected', tools: ['touch', 'boom'], since_ms: at },
        broken,
        // A ToolServer's (or an old spec's) server: status.toolServers' business, not listed here.
        {
          name: 'elsewhere',
          state: 'unreachable',
          tools: [],
          reason: 'cannot connect (ECONNREFUSED)',
          since_ms: at,
        },
      ],
    });
    await writeMcpStatus(
      asPup.redis,
      HOLT,
      WRITER,
      report({
        name: 'broken',
        state: 'refused',
        tools: [],
        reason: 'its command cannot be started (ENOENT)',
        since_ms: at + 1_000,
      }),
    );
    const st = await eventually('status.mcpServers', async () => {
      const s = await writer();
      return s.mcpServers?.length === 2 ? s : undefined;
    });
    expect(st.mcpServers).toEqual([
      {
        name: 'tiny',
        ready: true,
        message: 'connected: 2 tools',
        tools: ['touch', 'boom'],
        lastChangeTime: '2026-11-26T23:00:00Z',
      },
      {
        name: 'broken',
        ready: false,
        message: 'refused: its command cannot be started (ENOENT)',
        lastChangeTime: '2026-11-26T23:00:01Z',
      },
    ]);
    const ready = await eventually('the note in Ready', async () => {
      const r = (await writer()).conditions?.find((c) => c.type === 'Ready');
      return r?.message.includes('MCP server broken') ? r : undefined;
    });
    expect(ready.message).toContain('MCP server broken refused: its command cannot be started (ENOENT)');
    expect(ready.message).not.toContain('tiny');
    expect(ready.message).not.toContain('elsewhere');
    // A down MCP server is not the agent down: Ready is what it would be without one (the pup's pod here).
    const coder = (await agentStatus()).conditions?.find((c) => c.type === 'Ready') as { reason?: string };
    expect(ready.reason).toBe(coder.reason);
    expect((await writer()).conditions?.find((c) => c.type === 'Degraded')?.status).toBe('False');
    // It comes back: listed ready, the note gone.
    await writeMcpStatus(
      asPup.redis,
      HOLT,
      WRITER,
      report({ name: 'broken', state: 'connected', tools: ['x'], since_ms: at + 2_000 }),
    );
    await eventually('broken connected, no note', async () => {
      const s = await writer();
      const r = s.conditions?.find((c) => c.type === 'Ready');
      return s.mcpServers?.[1]?.ready && r && !r.message.includes('MCP server') ? true : undefined;
    });
    // A command agent has no MCP servers: no field.
    expect((await agentStatus()) as { mcpServers?: unknown }).not.toHaveProperty('mcpServers');
  });

  it('steady state: polls keep reading Redis, and nothing is written', async () => {
    await op.settled();
    const before = op.ctx.client.writes();
    await readsAfter(5);
    await op.settled();
    expect(op.ctx.client.writes()).toBe(before);
  });

  it('an unreachable Redis keeps the last values and does not degrade the agent', async () => {
    const c = claim({ status: 'pending_exclusive', granted_exclusive_agent: ROLE });
    await bb.createClaim(c);
    await published();
    await inFlightIs(1);
    down = true;
    const st = await eventually('note in the Ready message', async () => {
      const s = await agentStatus();
      const ready = s.conditions?.find((x) => x.type === 'Ready');
      return ready?.message.includes('not refreshed') ? s : undefined;
    });
    expect(st.claimsInFlight).toBe(1);
    expect(st.budget).toMatchObject({ paused: true, calls: 4 });
    expect(st.memory).toEqual({ memories: 4, recalls: 9 });
    expect(st.conditions?.find((x) => x.type === 'Degraded')?.status).toBe('False');
    await output(c, 'exclusive');
    await published();
    down = false;
    await inFlightIs(0);
    await eventually('note gone', async () => {
      const ready = (await agentStatus()).conditions?.find((x) => x.type === 'Ready');
      return ready && !ready.message.includes('not refreshed') ? true : undefined;
    });
  });
});

describe('an external Redis whose ACL predates mcp_status (real Redis)', () => {
  it("the operator's read still gives the load and budget, without MCP servers", async () => {
    const pw = newPasswords();
    // The operator's rules as they were before the key: no read of mcp_status.
    const acl = redisAclLines(HOLT, pw).map((l) => l.replace(` %R~holt:${HOLT}:mcp_status:*`, ''));
    expect(acl.join('\n')).not.toMatch(/operator.*mcp_status/);
    const old = await startRedis({ acl, adminPassword: pw.admin });
    const boards = new HoltBoards(async () => redisUrl('operator', pw.operator, '127.0.0.1', old.port));
    const reader = new RedisFiguresReader(boards, { maxAgeMs: 0 });
    const seed = Blackboard.connect(old.url, HOLT);
    try {
      await writeAgentStatus(seed.redis, HOLT, WRITER, llmStatus());
      await writeMcpStatus(seed.redis, HOLT, WRITER, { updated_at_ms: 1, servers: [] });
      const f = await reader.read({ namespace: NS, name: HOLT }, WRITER);
      expect(f.budget?.calls).toBe(3);
      expect(f.mcp).toBeUndefined();
    } finally {
      await reader.close();
      await seed.close();
      await old.stop();
    }
  });
});
