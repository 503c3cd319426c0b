import type { Mode } from '../access/tokens.ts';

/**
 * The checks of a request's parts that need no token and no store (pure): its route, its content
 * type, its body's bytes and its JSON's depth. Each refusal says what was wrong; none throws, so a
 * malformed request can never surface as a store failure (503, "retry").
 */

export type Checked<T> =
  | { ok: true; value: T }
  | { ok: false; status: number; error: string; allow?: string };

const no = (status: number, error: string, allow?: string) =>
  ({ ok: false, status, error, ...(allow ? { allow } : {}) }) as const;

/** JSON nested deeper than this is refused before it is parsed. */
export const MAX_JSON_DEPTH = 32;

// An agent's role name (src/api/common.ts roleName; the ingress layer does not import the API).
const ROLE = /^[A-Za-z0-9-]{1,64}$/;
const ROUTE = /^\/v1\/agents\/([^/]+)\/(messages|wake|tasks)(?:\/([^/]+))?$/;
const TASK_ID = /^[0-9a-f-]{6,36}$/;

/** Where a request goes: a message or a wake hint for an agent, its tasks (an operator's), or A2A. */
export type Route =
  | { role: string; mode: Mode }
  | { role: string; mode: 'tasks'; method: 'GET' | 'DELETE'; id?: string }
  | { role: string; mode: 'a2a' | 'a2a_card' };

const A2A_ROUTE = /^\/a2a\/([^/]+)(\/\.well-known\/agent-card\.json)?\/?$/;

/** `POST /a2a/{role}` (A2A JSON-RPC) and `GET /a2a/{role}/.well-known/agent-card.json`. */
function a2aRouteOf(method: string, m: RegExpExecArray): Checked<Route> {
  let role: string;
  try {
    role = decodeURIComponent(m[1]!);
  } catch {
    return no(400, 'the path has a malformed % escape');
  }
  if (!ROLE.test(role)) return no(400, 'the role in the path must be 1-64 letters, digits or hyphens');
  if (m[2])
    return method === 'GET' ? { ok: true, value: { role, mode: 'a2a_card' } } : no(405, 'use GET', 'GET');
  return method === 'POST'
    ? { ok: true, value: { role, mode: 'a2a' } }
    : no(405, 'A2A is JSON-RPC: use POST (the card is at .well-known/agent-card.json)', 'POST');
}

/**
 * `POST /v1/agents/{role}/messages|wake`, `GET /v1/agents/{role}/tasks[/{id}]`, `DELETE
 * /v1/agents/{role}/tasks/{id}`: the role (percent-decoded, a role name) and what is asked.
 */
export function routeOf(method: string, url: string): Checked<Route> {
  const path = url.split('?')[0] ?? '/';
  const a2a = A2A_ROUTE.exec(path);
  if (a2a) return a2aRouteOf(method, a2a);
  const m = ROUTE.exec(path);
  const kind = m?.[2];
  if (!m || (kind !== 'tasks' && m[3] !== undefined))
    return no(
      404,
      'not found: POST /v1/agents/{role}/messages or /wake; GET /v1/agents/{role}/tasks[/{id}]; DELETE /v1/agents/{role}/tasks/{id}; A2A: POST /a2a/{role}, GET /a2a/{role}/.well-known/agent-card.json',
    );
  let role: string;
  let id: string | undefined;
  try {
    role = decodeURIComponent(m[1]!);
    id = m[3] === undefined ? undefined : decodeURIComponent(m[3]).toLowerCase();
  } catch {
    return no(400, 'the path has a malformed % escape');
  }
  if (!ROLE.test(role)) return no(400, 'the role in the path must be 1-64 letters, digits or hyphens');
  if (kind !== 'tasks') {
    if (method !== 'POST') return no(405, 'use POST', 'POST');
    return { ok: true, value: { role, mode: kind === 'messages' ? 'enqueue_message' : 'wake_hint' } };
  }
  if (method !== 'GET' && method !== 'DELETE')
    return no(405, 'use GET or DELETE', id === undefined ? 'GET' : 'GET, DELETE');
  if (id !== undefined && !TASK_ID.test(id))
    return no(400, 'a task id is 6-36 hex digits and hyphens (holt life tasks ROLE lists them)');
  if (method === 'DELETE' && id === undefined) return no(405, 'DELETE a task by its id: /tasks/{id}', 'GET');
  return { ok: true, value: { role, mode: 'tasks', method, ...(id !== undefined ? { id } : {}) } };
}

/** A body is JSON: no content type (curl and many hooks send none), application/json or a +json type, in UTF-8. */
export function contentTypeProblem(ct: string | undefined): string | undefined {
  if (ct === undefined || ct.trim() === '') return undefined;
  const [type = '', ...params] = ct.toLowerCase().split(';');
  const t = type.trim();
  if (t !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(t))
    return `the body must be JSON (Content-Type: application/json), not ${t.slice(0, 100)}${
      t === 'application/x-www-form-urlencoded' ? " (curl's -d alone sends that type)" : ''
    }`;
  const charset = params.map((p) => p.trim()).find((p) => p.startsWith('charset='));
  if (charset && !/^charset="?utf-8"?$/.test(charset)) return 'the body must be UTF-8 (charset=utf-8)';
  return undefined;
}

const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** The body as text: valid UTF-8 without NUL (Postgres text cannot hold one, and nothing needs it). */
export function textOf(body: Buffer): Checked<string> {
  if (body.includes(0)) return no(400, 'the body holds a NUL byte');
  try {
    return { ok: true, value: strict.decode(body) };
  } catch {
    return no(400, 'the body is not valid UTF-8');
  }
}

/**
 * Whether JSON text nests deeper than `max` arrays and objects, by a scan that skips strings: decided
 * before JSON.parse, so a deep document costs one pass and no recursion anywhere after.
 */
export function tooDeep(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** A string Postgres can keep: no NUL (a JSON "\u0000" escape) and no lone surrogate. */
export function storable(s: string): boolean {
  return !s.includes('\u0000') && s.isWellFormed();
}
