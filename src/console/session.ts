import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type ConsoleTokenEntry, findToken } from '../access/tokens.ts';
import { signInPage } from './sign-in.ts';

/**
 * Who may use the console, and how a browser becomes one: the two gates. `holt console` prints a
 * one-time link that signs one browser in (oneTimeLink); the orchestrator's console takes a console
 * token in a sign-in form (tokenSignIn). Either way the browser gets a session cookie (HttpOnly,
 * SameSite=Strict) and the page a CSRF token; no credential is ever in the page or the address bar.
 */

export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export const SECURITY_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  // Not no-referrer: under it a form's POST says `Origin: null`, which sameOrigin() must refuse (another
  // site can send that too). Other sites still get no Referer.
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

export interface Session {
  csrf: string;
  canAct: boolean;
  /** It may end itself (`POST sign-out`): a session of the sign-in form. */
  signOut?: boolean;
}

/** What a gate makes of a request: its session, or the gate answered it (a redirect, a refusal, the sign-in page). */
export interface ConsoleGate {
  session(req: IncomingMessage, res: ServerResponse, path: string): Promise<Session | undefined>;
}

export const same = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

export const refuse = (res: ServerResponse, status: number, text: string) => {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8' });
  res.end(`${text}\n`);
};

/** Whether a request comes from this origin: no Origin header (same-origin GET/HEAD), or its host is ours. */
export function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  const u = URL.parse(origin);
  return u !== null && (u.protocol === 'http:' || u.protocol === 'https:') && u.host === req.headers.host;
}

/** Why a session may not act now: read-only, no or a wrong CSRF token, another origin (or undefined). */
export function mayNotAct(req: IncomingMessage, s: Session): string | undefined {
  if (!s.canAct) return 'this console session is read-only';
  const csrf = req.headers['x-holt-csrf'];
  if (typeof csrf !== 'string' || !same(csrf, s.csrf)) return 'missing or wrong CSRF token';
  if (!sameOrigin(req)) return 'a request from another origin';
  return undefined;
}

const newId = () => randomBytes(24).toString('base64url');

/** The page's own files (no data, no credential): served before sign-in, so the sign-in page has its style. */
const isPublic = (path: string) => path === '/assets/app.css';

/**
 * The one-time link of `holt console`: its token (in `?token=`) is traded once for a session that may
 * act unless `readOnly`, and the browser is sent to the page without it.
 */
export function oneTimeLink(o: { token: string; readOnly: boolean; cookie: () => string }): ConsoleGate {
  let token: string | undefined = o.token;
  const sessions = new Map<string, Session>();
  return {
    async session(req, res, path) {
      const offered =
        req.method === 'GET' ? new URL(req.url ?? '/', 'http://c').searchParams.get('token') : null;
      if (offered !== null) {
        if (!token || !same(offered, token)) {
          refuse(res, 401, 'this console link was used or is wrong');
          return undefined;
        }
        token = undefined;
        const id = newId();
        sessions.set(id, { csrf: newId(), canAct: !o.readOnly });
        res.writeHead(303, {
          ...SECURITY_HEADERS,
          location: '/',
          'set-cookie': `${o.cookie()}=${id}; HttpOnly; SameSite=Strict; Path=/`,
        });
        res.end();
        return undefined;
      }
      const cookie = cookieOf(req, o.cookie());
      const s = cookie ? [...sessions.entries()].find(([k]) => same(k, cookie))?.[1] : undefined;
      if (s || isPublic(path)) return s ?? { csrf: '', canAct: false };
      refuse(res, 401, 'open the link holt console printed');
      return undefined;
    },
  };
}

/** A session of the sign-in form: the token it came with (its hash), so a revoked token ends it. */
interface TokenSession extends Session {
  sha256: string;
  expiresMs: number;
}

/** Sessions kept at most (the oldest goes first), and how long one lasts. */
const MAX_SESSIONS = 1000;
const SESSION_MS = 12 * 3600_000;
const COOKIE = 'holt_console';

/**
 * The orchestrator's console (behind the Holt's Ingress): a browser without a session gets the sign-in
 * page; `POST sign-in` with a console token of the Holt's token file signs it in (`act` tokens may
 * act). A wrong token counts as a failed authentication of its source (`failed`), like a wrong bearer
 * token of the ingress. A session ends after 12 hours, or as soon as its token leaves the file.
 */
export function tokenSignIn(o: {
  /** The path the console is served under (`/console`): the cookie's path and the redirects'. */
  base: string;
  tokens: () => ConsoleTokenEntry[];
  failed: (req: IncomingMessage) => void;
  signedIn?: (token: ConsoleTokenEntry) => void;
  now?: () => number;
}): ConsoleGate {
  const now = o.now ?? Date.now;
  const sessions = new Map<string, TokenSession>();
  const cookie = (req: IncomingMessage, id: string, maxAge: number) =>
    `${COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=${o.base}/; Max-Age=${maxAge}${req.headers['x-forwarded-proto'] === 'https' ? '; Secure' : ''}`;
  const page = (res: ServerResponse, status: number, message?: string) => {
    res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8' });
    res.end(signInPage(message));
  };
  const signIn = async (req: IncomingMessage, res: ServerResponse) => {
    if (!sameOrigin(req)) return refuse(res, 403, 'a sign-in from another origin');
    if (!(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded'))
      return refuse(res, 415, 'the sign-in is a form');
    let body = '';
    for await (const c of req) {
      body += String(c);
      if (body.length > 4096) return refuse(res, 413, 'the sign-in form is too long');
    }
    const offered = new URLSearchParams(body).get('token')?.trim() ?? '';
    const t = offered ? findToken(o.tokens(), offered) : undefined;
    if (!t) {
      o.failed(req);
      return page(res, 401, 'That token does not open this console.');
    }
    const id = newId();
    sessions.set(id, {
      csrf: newId(),
      canAct: t.access === 'act',
      signOut: true,
      sha256: t.sha256,
      expiresMs: now() + SESSION_MS,
    });
    while (sessions.size > MAX_SESSIONS) sessions.delete(sessions.keys().next().value as string);
    o.signedIn?.(t);
    res.writeHead(303, {
      ...SECURITY_HEADERS,
      location: `${o.base}/`,
      'set-cookie': cookie(req, id, SESSION_MS / 1000),
    });
    res.end();
  };
  return {
    async session(req, res, path) {
      if (req.method === 'POST' && path === '/sign-in') {
        await signIn(req, res);
        return undefined;
      }
      const id = cookieOf(req, COOKIE);
      const s = id ? sessions.get(id) : undefined;
      const live =
        s && s.expiresMs > now() && o.tokens().some((t) => same(t.sha256, s.sha256)) ? s : undefined;
      if (id && s && !live) sessions.delete(id);
      if (req.method === 'POST' && path === '/sign-out' && live && id) {
        if (mayNotAct(req, { ...live, canAct: true }))
          return void refuse(res, 403, 'missing or wrong CSRF token');
        sessions.delete(id);
        res.writeHead(204, { ...SECURITY_HEADERS, 'set-cookie': cookie(req, '', 0) });
        res.end();
        return undefined;
      }
      if (live) return live;
      if (isPublic(path)) return { csrf: '', canAct: false };
      if (req.method === 'GET' && (path === '/' || path === '/index.html')) page(res, 200);
      else refuse(res, 401, 'sign in to the console first');
      return undefined;
    },
  };
}
