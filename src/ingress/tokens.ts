import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { TOKEN_ORIGINS } from '../life/labels.ts';

/**
 * Ingress capability tokens (seed 003's per-agent external ingress). A token is shown once when made;
 * only its SHA-256 is kept, in one JSON file the orchestrator reads: `holt token` writes it on a laptop,
 * the operator writes it into a Secret on a cluster. Each token is for one agent, has a scope per
 * delivery mode, an origin (which sets the labels of what it lets in) and a rate limit.
 */

export const MODES = ['enqueue_message', 'wake_hint'] as const;
export type Mode = (typeof MODES)[number];

export const TokenEntry = z.object({
  name: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a token name is a DNS label: [a-z0-9-], at most 63'),
  role: z.string().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  modes: z.array(z.enum(MODES)).min(1),
  origin: z.enum(TOKEN_ORIGINS).default('webhook'),
  /** Requests per minute (a bucket of as many, refilled evenly). */
  ratePerMinute: z.number().int().min(1).max(100_000).default(60),
  createdAtMs: z.number().int().default(0),
});
export type TokenEntry = z.infer<typeof TokenEntry>;

export const TokenFile = z.object({ tokens: z.array(TokenEntry).default([]) });
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
export function findToken(tokens: TokenEntry[], presented: string): TokenEntry | undefined {
  const h = Buffer.from(hashToken(presented), 'hex');
  return tokens.find((t) => timingSafeEqual(Buffer.from(t.sha256, 'hex'), h));
}

export function readTokenFile(file: string): TokenFile {
  if (!existsSync(file)) return { tokens: [] };
  const raw = readFileSync(file, 'utf8');
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (e) {
    throw new Error(`${file} is not JSON: ${(e as Error).message}`);
  }
  const r = TokenFile.safeParse(json);
  if (!r.success) throw new Error(`${file} is not a token file: ${r.error.issues[0]?.message}`);
  return r.data;
}

/** Atomic replace, owner-only (it holds hashes, but still: nobody else needs it). */
export function writeTokenFile(file: string, f: TokenFile): void {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = join(dirname(file), `.tokens.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(TokenFile.parse(f), null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

/** Adds a token for `role`; returns the token itself, which is not kept anywhere. */
export function createToken(
  file: string,
  t: { name: string; role: string; modes: Mode[]; origin?: TokenEntry['origin']; ratePerMinute?: number },
): { token: string; entry: TokenEntry } {
  const f = readTokenFile(file);
  if (f.tokens.some((x) => x.role === t.role && x.name === t.name))
    throw new Error(
      `agent ${t.role} already has a token named ${t.name}: revoke it first, or pick another name`,
    );
  const token = newToken();
  const entry = TokenEntry.parse({ ...t, sha256: hashToken(token), createdAtMs: Date.now() });
  writeTokenFile(file, { tokens: [...f.tokens, entry] });
  return { token, entry };
}

/** Removes a token by agent and name; false when there was none. */
export function revokeToken(file: string, role: string, name: string): boolean {
  const f = readTokenFile(file);
  const left = f.tokens.filter((x) => !(x.role === role && x.name === name));
  if (left.length === f.tokens.length) return false;
  writeTokenFile(file, { tokens: left });
  return true;
}

/**
 * The token file as the server sees it: read again when it changes (mtime and size), so a revoke or a
 * new token takes effect without a restart. A file that breaks keeps the last good list, and says so.
 */
export function tokenSource(file: string, onError: (e: Error) => void): () => TokenEntry[] {
  let seen = '';
  let tokens: TokenEntry[] = [];
  return () => {
    let stamp = 'absent';
    try {
      const s = statSync(file);
      stamp = `${s.mtimeMs}/${s.size}`;
    } catch {
      // absent: no tokens
    }
    if (stamp === seen) return tokens;
    try {
      tokens = stamp === 'absent' ? [] : readTokenFile(file).tokens;
      seen = stamp;
    } catch (e) {
      onError(e as Error);
    }
    return tokens;
  };
}
