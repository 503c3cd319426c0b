import type { Passwords, Principal } from './principals.ts';

interface Permissions {
  publish: string[];
  subscribe: string[];
}

/** nats.js replies and requests go through _INBOX; everyone needs to hear their own replies. */
const INBOX = '_INBOX.>';
const DOORBELLS = 'cmd.agent.*.wakeup';
const EVENTS = 'evt.agent.>';

/**
 * Subjects per principal: the orchestrator rings doorbells; pups (workers) answer them, re-ring and
 * publish step/task/chunk events; the operator only listens to doorbells (its scaling signal).
 */
export const NATS_PERMISSIONS: Record<Exclude<Principal, 'admin'>, Permissions> = {
  orchestrator: { publish: [DOORBELLS, EVENTS], subscribe: [INBOX] },
  pup: { publish: [DOORBELLS, EVENTS], subscribe: [DOORBELLS, INBOX] },
  operator: { publish: [], subscribe: [DOORBELLS, INBOX] },
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
    return `    { user: ${q(who)}, password: ${q(passwords[who])}, permissions: { publish: { ${publish} }, subscribe: { allow: ${list(p.subscribe)} } } }`;
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
