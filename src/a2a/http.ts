import type { IncomingMessage, ServerResponse } from 'node:http';
import { AgentCard, Extensions, formatSSEErrorEvent, formatSSEEvent, SSE_HEADERS } from '@a2a-js/sdk';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import {
  type A2ARequestHandler,
  defaultServerCallContextBuilder,
  JsonRpcTransportHandler,
  type User,
  validateVersion,
} from '@a2a-js/sdk/server';

/**
 * A2A's JSON-RPC binding on plain node:http (the SDK's transport does the protocol; this is the wire):
 * v1.0 for callers sending `A2A-Version: 1.0`, v0.3 for those sending none (as the SDK routes them);
 * a stream as server-sent events with a comment line every 15 s, so proxies keep it open; the card
 * as proto JSON (`AgentCard.toJSON`: a plain JSON.stringify breaks its security schemes).
 */

const HEARTBEAT_MS = 15_000;

const header = (req: IncomingMessage, name: string) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
};

/** The A2A version a request asks for: its header, else 0.3 (an A2A v0.3 client sends none). */
export const requestedVersion = (req: IncomingMessage) => header(req, 'a2a-version') || '0.3';

/** The agent card as the caller's version reads it (v0.3: the fields it knows, next to v1.0's). */
export function cardJson(card: AgentCard, version: string): unknown {
  const v1 = AgentCard.toJSON(card) as Record<string, unknown>;
  if (version !== '0.3') return v1;
  const url = card.supportedInterfaces[0]?.url ?? '';
  return {
    ...v1,
    url,
    preferredTransport: 'JSONRPC',
    protocolVersion: '0.3.0',
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'opaque' } },
    security: [{ bearer: [] }],
    securityRequirements: undefined,
    skills: card.skills.map(({ securityRequirements: _s, ...s }) => s),
  };
}

class TokenUser implements User {
  readonly #name: string;
  constructor(name: string) {
    this.#name = name;
  }
  get isAuthenticated() {
    return true;
  }
  get userName() {
    return this.#name;
  }
}

const writeJson = (res: ServerResponse, body: unknown) => {
  if (res.headersSent) return;
  res.writeHead(200, { 'content-type': 'application/json', vary: 'A2A-Version' }).end(JSON.stringify(body));
};

/** One JSON-RPC request (its body already read and bounded) answered, streamed or not. */
export async function serveJsonRpc(
  req: IncomingMessage,
  res: ServerResponse,
  body: string,
  handler: A2ARequestHandler,
  card: AgentCard,
  caller: string,
): Promise<void> {
  const version = requestedVersion(req);
  const legacy = version === '0.3';
  const mapError = legacy
    ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError
    : JsonRpcTransportHandler.mapToJSONRPCError;
  let id: unknown = null;
  let method: unknown;
  try {
    const j = JSON.parse(body) as { id?: unknown; method?: unknown };
    id = j.id ?? null;
    method = j.method;
  } catch {
    // the transport answers a parse error
  }
  const ext = legacy
    ? (header(req, 'x-a2a-extensions') ?? header(req, 'a2a-extensions'))
    : header(req, 'a2a-extensions');
  const ctx = defaultServerCallContextBuilder({
    extensions: Extensions.parseServiceParameter(ext),
    user: new TokenUser(caller),
    headers: req.headers,
    requestedVersion: version,
  });
  try {
    validateVersion(ctx.requestedVersion, card, 'JSONRPC');
  } catch (e) {
    return writeJson(res, { jsonrpc: '2.0', id, error: mapError(e) });
  }
  const out = await (legacy
    ? new LegacyJsonRpcTransportHandler(handler)
    : new JsonRpcTransportHandler(handler)
  ).handle(body, ctx);
  if (!(Symbol.asyncIterator in out)) return writeJson(res, out);
  const events = out as AsyncGenerator<unknown, void, undefined>;
  // An error before the first event is a plain JSON-RPC error (v0.3's resubscribe always streams).
  let first: IteratorResult<unknown, void> | undefined;
  if (!(legacy && method === 'tasks/resubscribe'))
    try {
      first = await events.next();
    } catch (e) {
      return writeJson(res, { jsonrpc: '2.0', id, error: mapError(e) });
    }
  res.writeHead(200, { ...SSE_HEADERS, vary: 'A2A-Version' });
  res.flushHeaders();
  let open = true;
  res.once('close', () => {
    open = false;
    void events.return(undefined);
  });
  const beat = setInterval(() => res.write(': ping\n\n'), HEARTBEAT_MS);
  try {
    if (first && !first.done) res.write(formatSSEEvent(first.value));
    for (let r = await events.next(); open && !r.done; r = await events.next())
      res.write(formatSSEEvent(r.value));
  } catch (e) {
    if (open) res.write(formatSSEErrorEvent({ jsonrpc: '2.0', id, error: mapError(e) }));
  } finally {
    clearInterval(beat);
    if (!res.writableEnded) res.end();
  }
}
