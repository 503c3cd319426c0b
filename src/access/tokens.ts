import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { Callback } from '../common/callback.ts';

/**
 * Ingress capability tokens (a living agent's external ingress): the model of a token and how it is
 * hashed and compared. A token is shown once when made; only its SHA-256 is kept. Each token is for one
 * agent, has a scope per delivery mode, an origin (which sets the labels of what it lets in: see
 * src/life/labels.ts) and a rate limit. The orchestrator checks tokens; the operator and `holt token`
 * make them; so the model lives here, with the other credentials.
 */

/** Who a token speaks for: the labels of what it lets in (src/life/labels.ts) follow from it. */
export const TOKEN_ORIGINS = ['operator', 'webhook', 'callback'] as const;
export type TokenOrigin = (typeof TOKEN_ORIGINS)[number];

export const MODES = ['enqueue_message', 'wake_hint'] as const;

/** The highest priority a message may have (0 is the default; the scheduler feeds higher ones first). */
export const MAX_PRIORITY = 9;
export type Mode = (typeof MODES)[number];

/** A token's name (an agent's or the console's): a DNS label. */
const TokenName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a token name is a DNS label: [a-z0-9-], at most 63');

/** What the file keeps of a token: its SHA-256, in hex. */
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);

export const TokenEntry = z.object({
  name: TokenName,
  role: z.string().min(1),
  sha256: Sha256,
  modes: z.array(z.enum(MODES)).min(1),
  origin: z.enum(TOKEN_ORIGINS).default('webhook'),
  /** Requests per minute (a bucket of as many, refilled evenly). */
  ratePerMinute: z.number().int().min(1).max(100_000).default(60),
  /**
   * Where its messages may ask their outcome to be delivered, by name (a message names one: never a URL
   * of its own, so no caller can make the Holt call an address of its choosing).
   */
  callbacks: z.array(Callback).max(20).default([]),
  /** The highest priority its messages may ask for (0: all are of the default priority). */
  maxPriority: z.number().int().min(0).max(MAX_PRIORITY).default(0),
  createdAtMs: z.number().int().default(0),
});
export type TokenEntry = z.infer<typeof TokenEntry>;

/**
 * A token that signs a browser into the console the orchestrator serves (src/console): `act` is an
 * operator's (answers, approvals, cancels), `read` may only look. It addresses no agent.
 */
export const ConsoleTokenEntry = z.object({
  name: TokenName,
  sha256: Sha256,
  access: z.enum(['read', 'act']),
  createdAtMs: z.number().int().default(0),
});
export type ConsoleTokenEntry = z.infer<typeof ConsoleTokenEntry>;

/** Where a console token opens the console: this path of the orchestrator's ingress port. */
export const CONSOLE_BASE = '/console';

export const TokenFile = z.object({
  tokens: z.array(TokenEntry).default([]),
  console: z.array(ConsoleTokenEntry).default([]),
});
export type TokenFile = z.infer<typeof TokenFile>;

export const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

/**
 * A token's id where its idempotency keys are kept: the first 16 hex digits of its hash (unique among
 * random 256-bit tokens, and no help to a guesser: the hash is of the token, which is not guessable).
 */
export const tokenId = (t: Pick<TokenEntry, 'sha256'>) => t.sha256.slice(0, 16);

/** A fresh token: 32 random bytes, prefixed so a leaked one is recognisable. */
export const newToken = () => `holt_${randomBytes(32).toString('base64url')}`;

/** The entry a presented token is for, compared in constant time; undefined for an unknown token. */
export function findToken<T extends Pick<TokenEntry, 'sha256'>>(
  tokens: T[],
  presented: string,
): T | undefined {
  const h = Buffer.from(hashToken(presented), 'hex');
  return tokens.find((t) => timingSafeEqual(Buffer.from(t.sha256, 'hex'), h));
}
