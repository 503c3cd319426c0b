import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { z } from 'zod';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { setAgents } from '../blackboard/registry.ts';
import { type Subscription, subscribe } from '../blackboard/subscriber.ts';
import { artefact, claimIdForArtefact } from '../blackboard/testkit.ts';
import {
  type AgentRegistration,
  type Artefact,
  type Claim,
  type ClaimType,
  GrantNotification,
  type StructuralType,
} from '../blackboard/types.ts';
import { type Logger, silentLogger } from '../common/logger.ts';
import { DEFAULTS, MAX_BID_TIMEOUT_FACTOR, type OrchestratorConfig } from './config.ts';
import { type OrchestratorInbox, startOrchestratorInbox } from './inbox.ts';
import { startOrchestratorIngress } from './ingress.ts';
import { Orchestrator, type OrchestratorOptions } from './orchestrator.ts';

/**
 * Test and benchmark helpers: agents that bid and answer through Redis directly (standing in for the
 * pup), orchestrators with fast settings, and a recorder of every message on an instance's channels.
 */

export interface Output {
  structural_type?: StructuralType;
  type?: string;
  payload?: string;
}

export interface AgentScript {
  role: string;
  /** The bid for a claim's target; null = never bid (a silent agent); any string is stored as is. */
  bid: (target: Artefact) => string | null;
  /** How long the agent takes over each bid (a slow bid script). */
  bidDelayMs?: number;
  /** What the agent produces for a grant; null = nothing (a hung agent). */
  respond?: (g: { claimType: ClaimType; claim: Claim; target: Artefact }) => Output | null;
}

const ClaimEvent = z.object({
  id: z.string(),
  artefact_id: z.string(),
  status: z.string(),
  granted_exclusive_agent: z.string().optional(),
});

/** A stand-in for a standard pup: bids on claim_events, executes grants once per (claim, role). */
export class ScriptedAgent {
  readonly script: AgentScript;
  readonly bb: Blackboard;
  /** Grant notifications received, duplicates included. */
  readonly grants: GrantNotification[] = [];
  /** Claims executed (deduplicated like the pup does). */
  readonly executed = new Set<string>();
  readonly outputs: Artefact[] = [];
  private sub: Subscription | null = null;
  private paused = false;
  private readonly held: (() => Promise<void>)[] = [];

  constructor(url: string, instance: string, script: AgentScript) {
    this.script = script;
    this.bb = Blackboard.connect(url, instance);
  }

  static async start(url: string, instance: string, script: AgentScript): Promise<ScriptedAgent> {
    const a = new ScriptedAgent(url, instance, script);
    const k = a.bb.k.channels;
    a.sub = await subscribe(
      url,
      [k.claimEvents, k.agentEvents(script.role)],
      z.unknown(),
      (msg, channel) => {
        const work = channel === k.claimEvents ? a.onClaim(msg) : a.onGrant(msg);
        work.catch(() => undefined);
      },
      () => undefined,
    );
    return a;
  }

  /** Holds executions until `release` (to observe a phase waiting for its last agent). */
  pause(): void {
    this.paused = true;
  }

  /** Resumes, losing the held work (as an agent that restarted would). */
  drop(): void {
    this.held.length = 0;
    this.paused = false;
  }

  async release(): Promise<void> {
    this.paused = false;
    for (const run of this.held.splice(0)) await run();
  }

  private async onClaim(msg: unknown): Promise<void> {
    const c = ClaimEvent.parse(msg);
    if (c.status === 'pending_assignment') {
      if (c.granted_exclusive_agent === this.script.role) await this.execute(c.id, 'exclusive');
      return;
    }
    const target = await this.bb.getArtefact(c.artefact_id);
    if (!target) return;
    const bid = this.script.bid(target);
    if (bid === null) return;
    if (this.script.bidDelayMs) await new Promise((r) => setTimeout(r, this.script.bidDelayMs));
    await this.bb.redis.hset(this.bb.k.bids(c.id), this.script.role, bid);
    await this.bb.publishWorkflowEvent({
      event: 'bid_submitted',
      data: { claim_id: c.id, agent_name: this.script.role, bid_type: bid },
    });
  }

  private async onGrant(msg: unknown): Promise<void> {
    const g = GrantNotification.parse(msg);
    this.grants.push(g);
    await this.execute(g.claim_id, g.claim_type);
  }

  private async execute(claimId: string, claimType: ClaimType): Promise<void> {
    if (this.paused) {
      this.held.push(() => this.execute(claimId, claimType));
      return;
    }
    if (this.executed.has(claimId)) return;
    const vc = await this.bb.getClaim(claimId);
    if (!vc) return;
    const c = vc.claim;
    const role = this.script.role;
    const mine =
      c.granted_exclusive_agent === role ||
      c.granted_review_agents.includes(role) ||
      c.granted_parallel_agents.includes(role);
    if (!mine) return;
    this.executed.add(claimId);
    const target = await this.bb.getArtefact(c.artefact_id);
    if (!target) return;
    const out = this.script.respond?.({ claimType, claim: c, target });
    if (!out) return;
    const rework = c.status === 'pending_assignment';
    const id = randomUUID();
    const artefact = rework
      ? {
          id,
          logical_id: target.logical_id,
          version: target.version + 1,
          type: target.type,
          source_artefacts: [target.id, ...(c.additional_context_ids ?? [])],
        }
      : { id, logical_id: id, version: 1, type: out.type ?? 'Output', source_artefacts: [target.id] };
    const { artefact: written } = await this.bb.createArtefact({
      ...artefact,
      structural_type: out.structural_type ?? (out.type === 'Review' ? 'Review' : 'Standard'),
      payload: out.payload ?? '',
      produced_by_role: role,
    });
    this.outputs.push(written);
    if (rework) {
      await this.bb.publishWorkflowEvent({
        event: 'artefact_reworked',
        data: {
          new_artefact_id: id,
          logical_id: target.logical_id,
          new_version: target.version + 1,
          previous_version_id: target.id,
          artefact_type: target.type,
          produced_by_role: role,
        },
      });
    }
  }

  async stop(): Promise<void> {
    await this.sub?.close();
    await this.bb.close();
  }
}

export interface LogLine {
  event_type?: string;
  [key: string]: unknown;
}

/** A debug-level logger that keeps every line (to wait for what the orchestrator decided). */
export function captureLogs(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) },
  );
  return { logger, lines };
}

export function testConfig(
  url: string,
  instance: string,
  over: Partial<OrchestratorConfig> = {},
): OrchestratorConfig {
  return {
    ...DEFAULTS,
    maxBidTimeoutMs: MAX_BID_TIMEOUT_FACTOR * (over.bidTimeoutMs ?? DEFAULTS.bidTimeoutMs),
    instance,
    redisUrl: url,
    healthPort: 0,
    reconcileIntervalMs: 200,
    bidPollMs: 50,
    leaseTtlMs: 600,
    standbyPollMs: 50,
    ...over,
  };
}

export function startOrchestrator(
  url: string,
  instance: string,
  over: Partial<OrchestratorConfig> = {},
  opts: Omit<OrchestratorOptions, 'config'> = {},
): Orchestrator {
  const o = new Orchestrator({ logger: silentLogger(), ...opts, config: testConfig(url, instance, over) });
  o.start();
  return o;
}

/**
 * The ingress of an orchestrator as `holt orchestrator` starts it, with its inbox (real Postgres and
 * NATS from `env`); serving while `orch` leads. Resolves with its port and one close for both.
 */
export async function startServedIngress(
  orch: Pick<Orchestrator, 'isLeader'>,
  o: { instance: string; env: NodeJS.ProcessEnv; bb: Blackboard },
): Promise<{ port: number; close(): Promise<void> }> {
  const isLeader = () => orch.isLeader();
  const inbox = (await startOrchestratorInbox({ ...o, isLeader, log: silentLogger() })) as OrchestratorInbox;
  const ingress = await startOrchestratorIngress({ ...o, inbox, log: silentLogger(), isLeader });
  if (!ingress) throw new Error('no ingress: HOLT_INGRESS_PORT, DATABASE_URL and NATS_URL are needed');
  return {
    port: ingress.port,
    close: async () => {
      await ingress.close();
      await inbox.close();
    },
  };
}

/** A goal made now, its logical id apart from its id (as a pup's goal has). */
export function newGoal(payload = 'build it', over: Partial<Artefact> = {}): Artefact {
  return artefact({ logical_id: randomUUID(), payload, created_at_ms: Date.now(), ...over });
}

export async function register(bb: Blackboard, roles: (string | AgentRegistration)[]): Promise<void> {
  await setAgents(
    bb,
    roles.map((r) => (typeof r === 'string' ? { role: r, kind: 'standard' as const } : r)),
  );
}

/** The claim made for an artefact, once it exists. */
export async function claimFor(bb: Blackboard, artefactId: string): Promise<Claim> {
  const id = await eventually(`a claim for ${artefactId}`, () => claimIdForArtefact(bb, artefactId));
  const vc = await bb.getClaim(id);
  if (!vc) throw new Error(`claim ${id} vanished`);
  return vc.claim;
}

export async function waitClaim(
  bb: Blackboard,
  claimId: string,
  pred: (c: Claim) => boolean,
  what = 'claim state',
): Promise<Claim> {
  return eventually(what, async () => {
    const vc = await bb.getClaim(claimId);
    return vc && pred(vc.claim) ? vc.claim : null;
  });
}

export interface Recorded {
  channel: string;
  msg: unknown;
}

/** Every message published on the instance's channels, in order. */
export async function recordChannels(url: string, instance: string) {
  const r = new Redis(url);
  const messages: Recorded[] = [];
  r.on('pmessage', (_p: string, channel: string, raw: string) => {
    messages.push({ channel: channel.slice(`holt:${instance}:`.length), msg: JSON.parse(raw) as unknown });
  });
  await r.psubscribe(`holt:${instance}:*`);
  return {
    messages,
    events: (name: string) =>
      messages
        .filter(
          (m) =>
            (m.channel === 'workflow_events' || m.channel === 'workflow_events_ext') &&
            (m.msg as { event: string }).event === name,
        )
        .map((m) => (m.msg as { data: Record<string, unknown> }).data),
    close: () => r.disconnect(),
  };
}

/**
 * One Redis for the calling test file (started before its tests, stopped after them) and a list of
 * cleanups run after each test, last first: what a file of orchestrator tests builds its worlds on.
 */
export function redisPerFile(): { url: () => string; cleanups: (() => Promise<void> | void)[] } {
  let server: RedisServer | undefined;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.stop();
  });
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const url = () => {
    if (!server) throw new Error('the Redis of this file has not started');
    return server.url;
  };
  return { url, cleanups };
}
