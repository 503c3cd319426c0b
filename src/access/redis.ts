import { createHash } from 'node:crypto';
import type { Passwords, Principal } from './principals.ts';

/**
 * The Redis user of each principal. Redis's own `default` user (what a client without a user name,
 * or with none at all, becomes) is off: every connection names its user.
 */
export const REDIS_USER: Record<Principal, string> = {
  admin: 'admin',
  orchestrator: 'orchestrator',
  pup: 'pup',
  operator: 'operator',
  tool: 'tool',
};

/** Commands no Holt process needs, beyond the `dangerous` category (INFO is ioredis's ready check). */
const DENIED = '-@dangerous +info -scan -script|flush -function';

/**
 * Key and channel rules per principal, for one instance's prefix. The orchestrator owns claims; a pup
 * writes artefacts (with their thread and indexes), its bids, its execution leases, its status and its
 * MCP servers' status, and reads the rest; the operator writes the agent registry and the workers' exit
 * reports, and reads the load, statuses, quarantine and retention report the Agents and Holts show.
 */
export function redisRules(instance: string): Record<Principal, string> {
  const p = `holt:${instance}:`;
  const rw = (...ks: string[]) => ks.map((k) => `~${p}${k}`).join(' ');
  const ro = (...ks: string[]) => ks.map((k) => `%R~${p}${k}`).join(' ');
  return {
    admin: '~* &* +@all',
    orchestrator: `${rw('*')} &${p}* +@all -@dangerous +info`,
    pup: [
      ro('*'),
      rw(
        'artefact:*',
        'thread:*',
        'index:artefacts',
        'index:children:*',
        'claim:*:bids',
        'pup:*',
        'agent_status:*',
        'mcp_status:*',
        // A channel name, passed to the artefact script as a key so the script stays cluster-shaped.
        'artefact_events',
      ),
      `&${p}*`,
      `+@all ${DENIED}`,
    ].join(' '),
    // A tool service's user exists so its password is one of the Secret's, and can do nothing.
    tool: 'resetkeys resetchannels -@all',
    operator: [
      rw('agents', 'agents:rev', 'agents_changed', 'agent_images', 'worker_exits'),
      // What the Agent and Holt statuses show, and nothing of the work: no claim, artefact or bid.
      ro('agent_load', 'agent_status:*', 'mcp_status:*', 'quarantine', 'retention'),
      `&${p}agents_changed`,
      `+@all ${DENIED}`,
    ].join(' '),
  };
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * `user` lines for redis.conf (or an ACL file). Passwords are stored as SHA-256 (`#…`), so the
 * file itself holds no password; `reset` first so a rewritten file never keeps an old grant.
 */
export function redisAclLines(instance: string, passwords: Passwords): string[] {
  return aclLines(instance, (who) => `#${sha256(passwords[who])}`);
}

/** The same lines with `>$VAR` passwords, for a start script that expands them from a Secret's env. */
export function redisAclTemplate(instance: string, variable: (who: Principal) => string): string[] {
  return aclLines(instance, (who) => `>$${variable(who)}`);
}

function aclLines(instance: string, password: (who: Principal) => string): string[] {
  const rules = redisRules(instance);
  return [
    // No password and off: a client that names no user, or `default`, is refused. Its grants serve
    // only the AOF replay on restart, which runs as `default` and re-checks each MULTI/EXEC's commands
    // against it: without them every transaction in the AOF is dropped (redis/redis#14541).
    'user default reset off ~* &* +@all',
    ...(Object.keys(REDIS_USER) as Principal[]).map(
      (who) => `user ${REDIS_USER[who]} reset on ${password(who)} ${rules[who]}`,
    ),
  ];
}

/** A principal's URL for a Redis at host:port (`rediss` with TLS). */
export function redisUrl(who: Principal, password: string, host: string, port: number, tls = false): string {
  return `${tls ? 'rediss' : 'redis'}://${REDIS_USER[who]}:${password}@${host}:${port}`;
}
