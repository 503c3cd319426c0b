import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { z } from 'zod';
import { personAnswer } from '../blackboard/approval.ts';
import type { Blackboard } from '../blackboard/client.ts';
import { Artefact } from '../blackboard/types.ts';
import type { Logger } from '../common/logger.ts';
import { LifeTasks } from '../life/tasks.ts';
import { type AgentRow, FailureLog, readAgents } from './agents.ts';
import { consoleAssets } from './assets.ts';
import { type LivingAgent, readLiving } from './life.ts';
import { WorkflowIndex } from './model.ts';
import { QuestionIndex } from './questions.ts';
import {
  type ConsoleGate,
  mayNotAct,
  oneTimeLink,
  refuse,
  SECURITY_HEADERS,
  type Session,
} from './session.ts';
import { graphSvg, readSteps, readWorkflow, timelineOf } from './workflow.ts';

/**
 * The console's server (docs/console.md): the page and its assets, the workflows and the open
 * questions as JSON, and their changes as server-sent events fed by the blackboard's artefact channel.
 * The board is read once, at start; after that only what is announced (and, as a backstop for
 * pub/sub's lost messages, the ids it has not seen) is read. A browser gets in through a gate
 * (session.ts): the one-time link `holt console` prints, or a console token in the orchestrator's
 * sign-in form, traded for a session cookie (HttpOnly, SameSite=Strict); every answer carries a
 * Content-Security-Policy that allows the console's own scripts and nothing else. Acting (answering a
 * question, approving a call, cancelling a task) takes a session that may act, the session's CSRF
 * token in a header, and a same-origin JSON request.
 */

export interface ConsoleOptions {
  /** The board; its connection's settings (TLS, credentials) make the console's subscription too. */
  bb: Blackboard;
  log: Logger;
  host?: string;
  port?: number;
  /** The one-time token; random when not given. */
  token?: string;
  /** How often the ids of the board are compared with what the console has (pub/sub loses messages). */
  backstopMs?: number;
  /** The link signs in a session that may look but not act. */
  readOnly?: boolean;
  /** How often the agents' registry and status hashes are read again (they change without an artefact). */
  agentsPollMs?: number;
  /** The Holt's Postgres: the living agents page, and cancelling their tasks (none: no such page). */
  pool?: pg.Pool;
  /** A trace viewer's base URL (Jaeger's UI): a workflow's trace id links to `<url>/trace/<id>`. */
  tracesUrl?: string;
  /**
   * Signs that a living agent changed (the bus's life events and wake bells): the living agents are
   * read again at once, not only at the next poll. Returns the unsubscribe.
   */
  lifeChanges?: (changed: () => void) => () => void;
}

/** Where a workflow's trace is shown, or none (pure). Only an http(s) base is ever linked. */
export function traceLink(base: string | undefined, traceId: string | undefined): string | undefined {
  if (!base || !traceId || !/^[0-9a-f]{32}$/.test(traceId)) return undefined;
  const u = URL.parse(base);
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) return undefined;
  return `${u.href.replace(/\/+$/, '')}/trace/${traceId}`;
}

export interface Console {
  /** The URL to open, with its one-time token. */
  url: string;
  port: number;
  close(): Promise<void>;
}

export { CSP } from './session.ts';

/** Events kept for a browser that reconnects (Last-Event-ID); one further back gets `reset`. */
const REPLAY = 1000;
/**
 * The session cookie's name, per port: cookies do not tell ports apart, so two consoles on one host
 * (two Holts, or a read-only link beside one that acts) would otherwise sign each other out.
 */
const cookieName = (port: number) => `holt_console_${port}`;
/** The most an action's body may hold. */
const MAX_BODY = 64 * 1024;

const AnswerBody = z.object({ text: z.string().trim().min(1, 'an answer needs text').max(20_000) });

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** A JSON body of at most MAX_BODY bytes, or the reason it is refused. */
async function jsonBody(
  req: IncomingMessage,
): Promise<{ ok: true; body: unknown } | { ok: false; status: number; why: string }> {
  if (!(req.headers['content-type'] ?? '').startsWith('application/json'))
    return { ok: false, status: 415, why: 'the body must be JSON' };
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY) return { ok: false, status: 413, why: 'the body is too long' };
    chunks.push(c as Buffer);
  }
  try {
    return { ok: true, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, status: 400, why: 'the body is not JSON' };
  }
}

/** The console's data and routes, behind a gate; served by `holt console` or by the orchestrator's ingress. */
export interface ConsoleCore {
  /** Answers a request for `path` (the console's own path: `/`, `/api/…`, `/assets/…`). */
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
  close(): Promise<void>;
}

export type ConsoleCoreOptions = Omit<ConsoleOptions, 'host' | 'port' | 'token' | 'readOnly'> & {
  gate: ConsoleGate;
};

export async function createConsole(o: ConsoleCoreOptions): Promise<ConsoleCore> {
  const assets = consoleAssets();
  const workflows = new WorkflowIndex();
  const questions = new QuestionIndex();
  const failures = new FailureLog();
  let agents: AgentRow[] = [];
  const events: { id: number; text: string }[] = [];
  let seq = 0;
  const clients = new Set<ServerResponse>();

  let living: LivingAgent[] = [];
  const publish = (event: 'workflow' | 'question' | 'agents' | 'living', items: unknown[]) => {
    for (const item of items) {
      const text = `id: ${++seq}\nevent: ${event}\ndata: ${JSON.stringify(item)}\n\n`;
      events.push({ id: seq, text });
      if (events.length > REPLAY) events.shift();
      for (const c of clients) c.write(text);
    }
  };
  const add = (a: Artefact) => {
    publish('workflow', workflows.add(a));
    publish('question', questions.add(a));
    failures.add(a);
  };
  /** The agents read again; their list sent when it changed. */
  const pollAgents = async () => {
    const now = await readAgents(o.bb, failures);
    if (JSON.stringify(now) === JSON.stringify(agents)) return;
    agents = now;
    publish('agents', [agents]);
  };
  /** The artefacts the console has not seen yet, read by id (the whole board only the first time). */
  const catchUp = async () => {
    const unseen = (await o.bb.listArtefactIds()).filter((id) => !workflows.has(id));
    if (!unseen.length) return;
    const read = (await o.bb.getArtefacts(unseen)).filter((a): a is Artefact => a !== null);
    for (const a of read.sort((x, y) => x.created_at_ms - y.created_at_ms)) add(a);
  };
  /** The living agents read again from Postgres; sent when they changed. */
  const pollLiving = async () => {
    if (!o.pool) return;
    const now = await readLiving(o.pool, o.bb.instance);
    if (JSON.stringify(now) === JSON.stringify(living)) return;
    living = now;
    publish('living', [living]);
  };
  await catchUp();
  await Promise.all([pollAgents(), pollLiving()]);

  // Re-subscribed by hand after a reconnect (ioredis' own leaves its SUBSCRIBE uncaught when closed
  // meanwhile); what was published while it was away is read by the catch-up.
  const channel = o.bb.k.channels.artefactEvents;
  const sub = o.bb.redis.duplicate({ autoResubscribe: false });
  sub.on('error', () => undefined);
  sub.on('message', (_ch: string, raw: string) => {
    let parsed: ReturnType<typeof Artefact.safeParse>;
    try {
      parsed = Artefact.safeParse(JSON.parse(raw));
    } catch {
      return;
    }
    // An artefact whose sources the console missed waits for the catch-up, which reads them first.
    if (parsed.success && parsed.data.source_artefacts.every((s) => workflows.has(s))) add(parsed.data);
  });
  await sub.subscribe(channel);
  let lost = false;
  sub.on('close', () => {
    lost = true;
  });
  sub.on('ready', () => {
    if (!lost) return;
    lost = false;
    sub.subscribe(channel).catch(() => undefined);
    catchUp().catch(() => undefined);
  });
  const backstop = setInterval(() => {
    catchUp().catch((e: unknown) =>
      o.log.warn({ event_type: 'console_catch_up_failed', error: String(e) }, 'catch-up failed'),
    );
  }, o.backstopMs ?? 30_000);
  const agentsTimer = setInterval(() => {
    pollAgents().catch((e: unknown) =>
      o.log.warn({ event_type: 'console_agents_failed', error: String(e) }, 'agents not read'),
    );
    pollLiving().catch((e: unknown) =>
      o.log.warn({ event_type: 'console_living_failed', error: String(e) }, 'living agents not read'),
    );
  }, o.agentsPollMs ?? 3_000);

  /** A person's answer from the page: a session that may act, its CSRF token, this origin, a valid body. */
  const answer = async (req: IncomingMessage, res: ServerResponse, s: Session, id: string) => {
    const no = mayNotAct(req, s);
    if (no) return refuse(res, 403, no);
    const b = await jsonBody(req);
    if (!b.ok) return refuse(res, b.status, b.why);
    const a = AnswerBody.safeParse(b.body);
    if (!a.success) return refuse(res, 400, a.error.issues[0]?.message ?? 'a bad answer');
    if (!questions.get(id)) return refuse(res, 404, `no open question ${id}`);
    const created = personAnswer(id, a.data.text);
    await o.bb.createArtefact(created);
    return json(res, 201, { answerId: created.id, questionId: id });
  };

  /**
   * A person cancels a living agent's task from the page (as `holt life cancel` does, audited as the
   * console's); the agent's loop sees it at its next pass (its poll: the console rings no doorbell).
   */
  const cancelTask = async (
    req: IncomingMessage,
    res: ServerResponse,
    s: Session,
    role: string,
    id: string,
  ) => {
    const no = mayNotAct(req, s);
    if (no) return refuse(res, 403, no);
    if (!o.pool) return refuse(res, 404, 'this console has no living agents (no Postgres)');
    const c = await new LifeTasks(o.pool).cancel(o.bb.instance, role, id, 'the console');
    if (c.kind !== 'cancelled') return refuse(res, 404, `agent ${role} has no open task ${id}`);
    await pollLiving();
    return json(res, 202, { task: c.task });
  };

  /** One workflow: its timeline (JSON), or its graph (SVG, under the same CSP: no script runs in it). */
  const workflowPage = async (res: ServerResponse, goal: string, svg: boolean) => {
    const w = workflows.workflow(goal);
    if (!w) return refuse(res, 404, `no workflow ${goal}`);
    const { artefacts, claims, bids } = await readWorkflow(o.bb, w.ids);
    const steps = o.pool
      ? await readSteps(
          o.pool,
          o.bb.instance,
          [...claims.values()].map((c) => c.id),
        )
      : undefined;
    const traceUrl = traceLink(o.tracesUrl, w.row.traceId);
    if (!svg)
      return json(res, 200, {
        workflow: w.row,
        timeline: timelineOf(artefacts, claims, bids, steps),
        ...(traceUrl ? { traceUrl } : {}),
      });
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'image/svg+xml' });
    res.end(await graphSvg(artefacts, claims, `workflow ${goal.slice(0, 8)}`));
  };

  /** Server-sent events from where the browser was: its Last-Event-ID on a reconnect, else `after`. */
  const stream = (req: IncomingMessage, res: ServerResponse, url: URL) => {
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream' });
    const last = Number(req.headers['last-event-id'] ?? url.searchParams.get('after') ?? Number.NaN);
    if (Number.isInteger(last) && last !== seq) {
      const missed = events.filter((e) => e.id > last);
      // Too far back (or from before a restart): the browser reads the lists again.
      if (last > seq || missed[0]?.id !== last + 1) res.write('event: reset\ndata: {}\n\n');
      else for (const e of missed) res.write(e.text);
    }
    res.write(': connected\n\n');
    clients.add(res);
    req.on('close', () => clients.delete(res));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    const session = await o.gate.session(req, res, path);
    if (!session) return;
    const url = new URL(req.url ?? '/', 'http://console');
    const act = /^\/api\/questions\/([0-9a-f-]{36})\/answer$/.exec(path);
    if (req.method === 'POST' && act) return answer(req, res, session, act[1]!);
    const cancel = /^\/api\/living\/([A-Za-z0-9-]{1,64})\/tasks\/([0-9a-f-]{36})\/cancel$/.exec(path);
    if (req.method === 'POST' && cancel) return cancelTask(req, res, session, cancel[1]!, cancel[2]!);
    if (req.method !== 'GET') return refuse(res, 405, 'method not allowed');
    if (path === '/api/session')
      return json(res, 200, {
        csrf: session.csrf,
        canAct: session.canAct,
        signOut: session.signOut === true,
      });
    if (path === '/api/workflows') return json(res, 200, { workflows: workflows.list(), lastEventId: seq });
    if (path === '/api/questions') return json(res, 200, { questions: questions.list(), lastEventId: seq });
    if (path === '/api/agents') return json(res, 200, { agents, lastEventId: seq });
    if (path === '/api/living')
      return json(res, 200, { living, enabled: o.pool !== undefined, lastEventId: seq });
    const wf = /^\/api\/workflows\/([0-9a-f-]{36})(\/graph\.svg)?$/.exec(path);
    if (wf) return workflowPage(res, wf[1]!, wf[2] !== undefined);
    const art = /^\/api\/artefacts\/([0-9a-f-]{36})$/.exec(path);
    if (art) {
      // Only an artefact of a workflow the console knows: its id was announced on this board.
      if (!workflows.has(art[1]!)) return refuse(res, 404, 'no such artefact');
      const [a] = await o.bb.getArtefacts([art[1]!]);
      return a ? json(res, 200, a) : refuse(res, 404, 'no such artefact');
    }
    if (path === '/api/events') return stream(req, res, url);
    const asset = assets.get(path === '/index.html' ? '/' : path);
    if (!asset) return refuse(res, 404, 'not found');
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type });
    res.end(asset.body);
  };
  // A burst of events (a turn's start, its messages' bells) is one read, 100 ms after the first.
  let soon: NodeJS.Timeout | undefined;
  const stopLifeChanges = o.lifeChanges?.(() => {
    soon ??= setTimeout(() => {
      soon = undefined;
      pollLiving().catch(() => undefined);
    }, 100);
  });
  const keepalive = setInterval(() => {
    for (const c of clients) c.write(': keepalive\n\n');
  }, 15_000);
  return {
    handle: (req, res, path) =>
      handle(req, res, path).catch((e: unknown) => {
        o.log.warn({ event_type: 'console_request_failed', error: String(e) }, 'console request failed');
        if (!res.headersSent) refuse(res, 500, 'the console could not do that');
        else res.end();
      }),
    async close() {
      clearInterval(backstop);
      clearInterval(agentsTimer);
      clearInterval(keepalive);
      clearTimeout(soon);
      stopLifeChanges?.();
      for (const c of clients) c.end();
      sub.disconnect();
    },
  };
}

/**
 * `holt console`'s server: the console on its own port of 127.0.0.1 (by default), opened with the
 * one-time link it returns.
 */
export async function startConsole(o: ConsoleOptions): Promise<Console> {
  const oneTime = o.token ?? randomBytes(24).toString('base64url');
  /** The port it listens on (the session cookie's name has it). */
  let listening = 0;
  const core = await createConsole({
    ...o,
    gate: oneTimeLink({ token: oneTime, readOnly: o.readOnly === true, cookie: () => cookieName(listening) }),
  });
  const server = createServer((req, res) => {
    void core.handle(req, res, new URL(req.url ?? '/', 'http://console').pathname);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.port ?? 0, o.host ?? '127.0.0.1', resolve);
    });
  } catch (e) {
    await core.close();
    throw e;
  }
  const { port } = server.address() as AddressInfo;
  listening = port;
  const host = o.host && o.host !== '0.0.0.0' ? o.host : '127.0.0.1';
  return {
    url: `http://${host}:${port}/?token=${encodeURIComponent(oneTime)}`,
    port,
    async close() {
      await core.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
