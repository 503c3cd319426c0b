import { createHmac } from 'node:crypto';
import type { Passwords, Principal } from './principals.ts';

export interface Permissions {
  publish: string[];
  subscribe: string[];
  /** May answer (once) each request it received, whatever its reply subject (nats-server's allow_responses). */
  responses?: boolean;
}

/** nats.js replies and requests go through _INBOX; everyone needs to hear their own replies. */
const INBOX = '_INBOX.>';
const DOORBELLS = 'cmd.agent.*.wakeup';
const EVENTS = 'evt.agent.>';
/** Living agents' wake bells (cmd.life.{instance}.{role}), tool requests and their answers. */
const LIFE_BELLS = 'cmd.life.>';
const TOOL_RESULTS = 'evt.tool.>';

/** An instance as one subject token, as src/bus/subjects.ts spells it (access imports no bus code). */
const token = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');
/** A tool's requests, `cmd.tool.<instance>.<name>` (src/bus/subjects.ts toolRequestSubject); `*` for all. */
const toolRequests = (instance: string, tool: string) =>
  `cmd.tool.${instance === '*' ? '*' : token(instance)}.${tool}`;

/**
 * How long a tool service may take to answer a request it got: nats-server's default (2 minutes) is
 * shorter than an asynchronous tool's timeout may be (asyncTimeoutSeconds, up to 7 days).
 */
const RESPONSE_WINDOW = '168h';

/**
 * A tool service's permissions: it hears the requests of these tools of one instance and may answer
 * each request it got, once; it publishes nothing else and hears nothing else. As its answers are
 * bound to the request's reply subject, it cannot answer another tool's call, nor another instance's.
 */
export function toolPermissions(instance: string, tools: string[]): Permissions {
  for (const t of tools)
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(t)) throw new Error(`invalid tool name ${JSON.stringify(t)}`);
  return {
    publish: [],
    subscribe: tools.flatMap((t) => [toolRequests(instance, t), `${toolRequests(instance, t)}.outcome`]),
    responses: true,
  };
}

/**
 * Subjects per principal, for one instance (`*`: any, when one NATS is a Holt's own): the
 * orchestrator rings doorbells (and living agents' wake bells, for the ingress); pups (workers) answer
 * doorbells, re-ring, publish step/task/chunk/life events, send the instance's tool requests and hear
 * wake bells and tool answers; the operator only listens to doorbells (its scaling signal); the `tool`
 * principal is every tool of the instance's service (toolPermissions); a service of one tool gets a
 * user of its own (toolUsers).
 */
export function natsPermissions(instance = '*'): Record<Exclude<Principal, 'admin'>, Permissions> {
  return {
    // It also delivers outcomes to tool services (a token's nats:<tool> callback), and its console
    // hears living agents' events and wake bells to show their changes at once.
    orchestrator: {
      publish: [DOORBELLS, EVENTS, LIFE_BELLS, `${toolRequests(instance, '*')}.outcome`],
      subscribe: [INBOX, EVENTS, LIFE_BELLS],
    },
    pup: {
      publish: [DOORBELLS, EVENTS, toolRequests(instance, '*')],
      subscribe: [DOORBELLS, INBOX, LIFE_BELLS, TOOL_RESULTS],
    },
    operator: { publish: [], subscribe: [DOORBELLS, INBOX] },
    tool: {
      publish: [],
      subscribe: [toolRequests(instance, '*'), `${toolRequests(instance, '*')}.outcome`],
      responses: true,
    },
  };
}

/** A NATS user of one tool service: may hear only its tools' requests (toolPermissions). */
export interface ToolUser {
  user: string;
  password: string;
  tools: string[];
}

/** The user name of the service of one tool (`holt tool-url --tool <name>`). */
export const toolUserName = (tool: string) => `tool-${tool}`;

/**
 * The per-tool users of an instance: each tool's password derived from the `tool` principal's secret
 * (HMAC), so the CLI can print it and nothing new is stored; knowing one gives no other.
 */
export function toolUsers(toolSecret: string, tools: string[]): ToolUser[] {
  return [...new Set(tools)].sort().map((t) => ({
    user: toolUserName(t),
    password: createHmac('sha256', toolSecret).update(`tool:${t}`).digest('hex'),
    tools: [t],
  }));
}

const q = (s: string) => JSON.stringify(s);
const list = (xs: string[]) => `[${xs.map(q).join(', ')}]`;

function userLine(user: string, password: string, p: Permissions): string {
  // An empty allow list would allow everything: deny all publishing explicitly instead.
  const publish = p.publish.length ? `allow: ${list(p.publish)}` : `deny: ${list(['>'])}`;
  const responses = p.responses ? `, allow_responses: { max: 1, expires: ${q(RESPONSE_WINDOW)} }` : '';
  return `    { user: ${q(user)}, password: ${q(password)}, permissions: { publish: { ${publish} }, subscribe: { allow: ${list(p.subscribe)} }${responses} } }`;
}

/**
 * The `authorization` block of nats-server's config: one user per principal (admin unrestricted), for
 * `instance` (default: any), and a user per tool service in `tools`, for `toolInstance` (default:
 * `instance`; a Holt's own NATS keeps its principals at any instance but binds its per-tool users to
 * the Holt's). Plain passwords, so the file is a Secret (or 0600) and never a command line.
 */
export function natsAuthorization(
  passwords: Passwords,
  opts: { instance?: string; tools?: ToolUser[]; toolInstance?: string } = {},
): string {
  const instance = opts.instance ?? '*';
  const perms = natsPermissions(instance);
  const users = (Object.keys(perms) as (keyof typeof perms)[]).map((who) =>
    userLine(who, passwords[who], perms[who]),
  );
  const tools = (opts.tools ?? []).map((t) =>
    userLine(t.user, t.password, toolPermissions(opts.toolInstance ?? instance, t.tools)),
  );
  return [
    'authorization {',
    '  users: [',
    `    { user: "admin", password: ${q(passwords.admin)} }`,
    ...users,
    ...tools,
    '  ]',
    '}',
  ].join('\n');
}

export function natsUrl(who: Principal, password: string, host: string, port: number, tls = false): string {
  return `${tls ? 'tls' : 'nats'}://${who}:${password}@${host}:${port}`;
}
