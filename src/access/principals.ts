import { randomBytes } from 'node:crypto';

/**
 * Who talks to the stores. Each gets its own user with what it uses and no more (docs/security.md):
 * `admin` is the person (the CLI) and the stores' own probes; orchestrator, pup and operator are
 * Holt's processes; `tool` is a tool service answering living agents' asynchronous tools: NATS only,
 * hearing `cmd.tool.>` and answering each request it got, once; no Redis or Postgres right. Tools run
 * by a pup and models are not principals: they hold no credential at all.
 */
export const PRINCIPALS = ['admin', 'orchestrator', 'pup', 'operator', 'tool'] as const;
export type Principal = (typeof PRINCIPALS)[number];
export type Passwords = Record<Principal, string>;

/** Hex only: safe in URLs, config files and shell words without quoting. */
export const newPassword = (): string => randomBytes(24).toString('hex');

export function newPasswords(): Passwords {
  return Object.fromEntries(PRINCIPALS.map((p) => [p, newPassword()])) as Passwords;
}
