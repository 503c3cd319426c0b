import type { Passwords, Principal } from './principals.ts';

interface Permissions {
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
const TOOL_REQUESTS = 'cmd.tool.>';
const TOOL_RESULTS = 'evt.tool.>';

/**
 * Subjects per principal: the orchestrator rings doorbells (and living agents' wake bells, for the
 * ingress); pups (workers) answer doorbells, re-ring, publish step/task/chunk/life events, send tool
 * requests and hear wake bells and tool answers; the operator only listens to doorbells (its scaling
 * signal); a tool service hears tool requests and may only answer them.
 */
export const NATS_PERMISSIONS: Record<Exclude<Principal, 'admin'>, Permissions> = {
  orchestrator: { publish: [DOORBELLS, EVENTS, LIFE_BELLS], subscribe: [INBOX] },
  pup: {
    publish: [DOORBELLS, EVENTS, TOOL_REQUESTS],
    subscribe: [DOORBELLS, INBOX, LIFE_BELLS, TOOL_RESULTS],
  },
  operator: { publish: [], subscribe: [DOORBELLS, INBOX] },
  tool: { publish: [], subscribe: [TOOL_REQUESTS], responses: true },
};

const q = (s: string) => JSON.stringify(s);
const list = (xs: string[]) => `[${xs.map(q).join(', ')}]`;

/**
 * The `authorization` block of nats-server's config: one user per principal (admin unrestricted).
 * Plain passwords, so the file is a Secret (or 0600) and never a command line.
 */
export function natsAuthorization(passwords: Passwords): string {
  const users = (Object.keys(NATS_PERMISSIONS) as (keyof typeof NATS_PERMISSIONS)[]).map((who) => {
    const p = NATS_PERMISSIONS[who];
    // An empty allow list would allow everything: deny all publishing explicitly instead.
    const publish = p.publish.length ? `allow: ${list(p.publish)}` : `deny: ${list(['>'])}`;
    const responses = p.responses ? ', allow_responses: true' : '';
    return `    { user: ${q(who)}, password: ${q(passwords[who])}, permissions: { publish: { ${publish} }, subscribe: { allow: ${list(p.subscribe)} }${responses} } }`;
  });
  return [
    'authorization {',
    '  users: [',
    `    { user: "admin", password: ${q(passwords.admin)} }`,
    ...users,
    '  ]',
    '}',
  ].join('\n');
}

export function natsUrl(who: Principal, password: string, host: string, port: number, tls = false): string {
  return `${tls ? 'tls' : 'nats'}://${who}:${password}@${host}:${port}`;
}
