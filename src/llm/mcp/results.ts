import type { ErrorClass } from '../../blackboard/error-class.ts';

/** Pure parts of the MCP client: tool names, schemas, results mapped to text, errors classed. */

type Json = Record<string, unknown>;

/** Between a server's name and its tool's: `everything__echo`. */
export const SEPARATOR = '__';
/** A model's function name: what the OpenAI API accepts. */
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** The name the model calls a server's tool by, or undefined when it cannot have one. */
export function exposedName(server: string, tool: string): string | undefined {
  const n = `${server}${SEPARATOR}${tool}`;
  return FUNCTION_NAME.test(n) ? n : undefined;
}

/** The most bytes of a tool's input schema given to the model (a schema is prompt tokens). */
export const MAX_SCHEMA_BYTES = 16 * 1024;

/**
 * A server's tool schema as the model will see it, or why it is refused: an object schema (the
 * model's arguments are an object), within the size cap.
 */
export function checkSchema(schema: unknown): { ok: true; schema: Json } | { ok: false; error: string } {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema))
    return { ok: false, error: 'its input schema is not a JSON object' };
  const s = schema as Json;
  if (s.type !== 'object')
    return { ok: false, error: `its input schema is of type ${JSON.stringify(s.type)}, not object` };
  const size = Buffer.byteLength(JSON.stringify(s));
  if (size > MAX_SCHEMA_BYTES)
    return { ok: false, error: `its input schema is ${size} bytes, over the ${MAX_SCHEMA_BYTES} allowed` };
  return { ok: true, schema: s };
}

/** Whether the server's tool `name` is offered: the allowlist (none = all). */
export const allowed = (name: string, list: string[] | undefined) => !list || list.includes(name);

const cut = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…[truncated]` : s);
const b64Bytes = (data: unknown) => (typeof data === 'string' ? Math.floor((data.length * 3) / 4) : 0);

/** One content block as text: text as is; images, audio and blobs as a short reference, never their bytes. */
export function contentText(c: Json): string {
  switch (c.type) {
    case 'text':
      return String(c.text ?? '');
    case 'image':
    case 'audio':
      return `[${c.type} ${String(c.mimeType ?? '')}, ${b64Bytes(c.data)} bytes: kept by the server, not shown]`;
    case 'resource_link':
      return `[resource link ${String(c.uri ?? '')}${c.name ? ` (${String(c.name)})` : ''}${c.mimeType ? ` ${String(c.mimeType)}` : ''}: read it with mcp_read_resource]`;
    case 'resource': {
      const r = (c.resource ?? {}) as Json;
      if (typeof r.text === 'string') return `[resource ${String(r.uri ?? '')}]\n${r.text}`;
      return `[resource ${String(r.uri ?? '')} ${String(r.mimeType ?? '')}, ${b64Bytes(r.blob)} bytes of binary: not shown]`;
    }
    default:
      return `[content of type ${JSON.stringify(c.type)}: not shown]`;
  }
}

/**
 * A tool's result as the model reads it, capped at `maxChars`: its content blocks, else its
 * structured content as JSON. `isError` makes it a tool error.
 */
export function resultText(r: Json, maxChars: number): { text: string; isError: boolean } {
  const content = Array.isArray(r.content) ? (r.content as Json[]) : [];
  let text = content.map(contentText).join('\n');
  if (!text && r.structuredContent !== undefined) text = JSON.stringify(r.structuredContent);
  if (!text && typeof r.toolResult !== 'undefined') text = JSON.stringify(r.toolResult); // the 2024 shape
  const isError = r.isError === true;
  return {
    text: cut(isError ? `error: ${text || 'the tool failed'}` : text || '(no content)', maxChars),
    isError,
  };
}

/** A resource read (`resources/read`) as text, capped. */
export function resourceText(r: Json, maxChars: number): string {
  const contents = Array.isArray(r.contents) ? (r.contents as Json[]) : [];
  const text = contents.map((c) => contentText({ type: 'resource', resource: c })).join('\n');
  return cut(text || '(empty resource)', maxChars);
}

/** A prompt (`prompts/get`) as text, capped: each message with its role. */
export function promptText(r: Json, maxChars: number): string {
  const msgs = Array.isArray(r.messages) ? (r.messages as Json[]) : [];
  const text = msgs.map((m) => `${String(m.role)}: ${contentText((m.content ?? {}) as Json)}`).join('\n');
  return cut(text || '(empty prompt)', maxChars);
}

/** JSON-RPC codes the SDK and servers use. */
const CONNECTION_CLOSED = -32000;
const REQUEST_TIMEOUT = -32001;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;

/**
 * A protocol or transport error, classed: auth (401/403, an OAuth refusal), config (the server cannot
 * be started, a method it does not have, another 4xx), transient (timeouts, a closed connection, 5xx,
 * the network), tool (a call the server refused: bad parameters, its own failure).
 */
export function classify(e: unknown): ErrorClass {
  const err = e as { code?: unknown; name?: unknown; message?: unknown };
  const msg = String(err?.message ?? e);
  const code = typeof err?.code === 'number' ? err.code : undefined;
  if (err?.code === 'config') return 'config';
  if (err?.name === 'UnauthorizedError' || code === 401 || code === 403) return 'auth';
  if (code === REQUEST_TIMEOUT || code === CONNECTION_CLOSED) return 'transient';
  if (code === METHOD_NOT_FOUND) return 'config';
  if (code === INVALID_PARAMS || (code !== undefined && code < 0)) return 'tool';
  if (code !== undefined && code >= 500) return 'transient';
  if (code === 404 || code === 408 || code === 409 || code === 425 || code === 429) return 'transient';
  if (code !== undefined && code >= 400) return 'config';
  if (/cannot start|ENOENT|EACCES|not a valid URL|Invalid URL/i.test(msg)) return 'config';
  return 'transient';
}

/** Whether an HTTP server forgot our session (404 by the spec; some answer 400 naming the session). */
export function sessionLost(e: unknown): boolean {
  const err = e as { code?: unknown; message?: unknown };
  if (err?.code === 404) return true;
  return err?.code === 400 && /session/i.test(String(err?.message ?? ''));
}

/**
 * A call's time limit: the server's own, cut to what is left before `deadlineMs` (the turn's or the
 * goal's time box), so a call is cancelled there rather than outlive the turn. At least 1 ms.
 */
export function callTimeoutMs(ownMs: number, deadlineMs: number | undefined, nowMs: number): number {
  return Math.max(1, deadlineMs === undefined ? ownMs : Math.min(ownMs, deadlineMs - nowMs));
}
