import type { IncomingMessage, ServerResponse } from 'node:http';
import { agentCard, type CardInfo } from '../a2a/card.ts';
import { type A2ADeps, AgentA2AHandler, guarded } from '../a2a/handler.ts';
import { cardJson, requestedVersion, serveJsonRpc } from '../a2a/http.ts';
import type { AdmittedA2A, IngressDeps, Reply } from './admit.ts';
import { fail } from './admit.ts';
import { textOf, tooDeep } from './request.ts';

/**
 * The ingress's A2A routes (docs/agents.md § Reaching agents over A2A), after the ingress admitted the
 * request exactly as it admits a message (token of the agent, its scope, rate, type and size): the card,
 * and JSON-RPC served by src/a2a. An agent is served over A2A when its registration carries a card.
 */

export interface IngressA2A extends Pick<A2ADeps, 'tasks' | 'lifeTasks' | 'blockMs' | 'pollMs' | 'streamMs'> {
  /** The agent's card, or undefined when it is not served over A2A. */
  describe: (role: string) => Promise<CardInfo | undefined>;
  /** The base URL callers reach the ingress at (else taken from the request's Host). */
  publicUrl?: string;
  /** The card's version (the Holt's). */
  version: string;
}

/** The agent's A2A URL as its caller reaches it. */
function urlOf(req: IncomingMessage, role: string, publicUrl?: string): string {
  const base =
    publicUrl ??
    `${req.headers['x-forwarded-proto'] === 'https' ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}`;
  return `${base.replace(/\/+$/, '')}/a2a/${encodeURIComponent(role)}`;
}

/**
 * Answers an admitted A2A request; a Reply when the ingress is to write it (a refusal, the card),
 * undefined once the JSON-RPC answer was written here.
 */
export async function serveA2A(
  d: IngressDeps,
  a: AdmittedA2A,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | undefined,
): Promise<Reply | undefined> {
  const x = d.a2a;
  if (!x) return fail(404, 'this ingress does not serve A2A');
  const info = await x.describe(a.role);
  if (!info) return fail(404, `agent ${a.role} is not served over A2A (its Agent's ingress.a2a.enabled)`);
  const card = agentCard(a.role, urlOf(req, a.role, x.publicUrl), info, x.version);
  if (a.mode === 'a2a_card')
    return {
      status: 200,
      body: cardJson(card, requestedVersion(req)) as Record<string, unknown>,
      headers: { vary: 'A2A-Version' },
    };
  const text = textOf(body ?? Buffer.alloc(0));
  if (!text.ok) return fail(text.status, text.error);
  if (tooDeep(text.value)) return fail(400, 'the body nests JSON deeper than 32 levels');
  const handler = guarded(
    new AgentA2AHandler(
      {
        instance: d.instance,
        life: d.life,
        ring: d.ring,
        maxUndelivered: d.maxUndelivered,
        tasks: x.tasks,
        lifeTasks: x.lifeTasks,
        blockMs: x.blockMs,
        pollMs: x.pollMs,
        streamMs: x.streamMs,
        ...(d.now ? { now: d.now } : {}),
      },
      a.token,
      card,
    ),
    (e) => d.log.error({ event_type: 'a2a_failed', role: a.role, error: String(e) }, 'A2A request failed'),
  );
  await serveJsonRpc(req, res, text.value, handler, card, `token ${a.token.name}`);
  return undefined;
}
