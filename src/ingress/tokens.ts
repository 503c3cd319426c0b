import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { z } from 'zod';
import { hashToken, type Mode, newToken, TokenEntry, TokenFile } from '../access/tokens.ts';
import type { Callback } from '../common/callback.ts';

/**
 * The token file (src/access/tokens.ts has the token model; docs/runtime-model.md § Living agents):
 * one JSON file of hashed tokens the orchestrator reads, written by `holt token` on a laptop (the
 * operator writes the same into a Secret on a cluster).
 */

export function readTokenFile(file: string): TokenFile {
  if (!existsSync(file)) return TokenFile.parse({});
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
export function writeTokenFile(file: string, f: z.input<typeof TokenFile>): void {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = join(dirname(file), `.tokens.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(TokenFile.parse(f), null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

/** Adds a token for `role`; returns the token itself, which is not kept anywhere. */
export function createToken(
  file: string,
  t: {
    name: string;
    role: string;
    modes: Mode[];
    origin?: TokenEntry['origin'];
    ratePerMinute?: number;
    maxPriority?: number;
    callbacks?: Callback[];
  },
): { token: string; entry: TokenEntry } {
  const f = readTokenFile(file);
  if (f.tokens.some((x) => x.role === t.role && x.name === t.name))
    throw new Error(
      `agent ${t.role} already has a token named ${t.name}: revoke it first, or pick another name`,
    );
  const token = newToken();
  const entry = TokenEntry.parse({ ...t, sha256: hashToken(token), createdAtMs: Date.now() });
  writeTokenFile(file, { ...f, tokens: [...f.tokens, entry] });
  return { token, entry };
}

/** Removes a token by agent and name; false when there was none. */
export function revokeToken(file: string, role: string, name: string): boolean {
  const f = readTokenFile(file);
  const left = f.tokens.filter((x) => !(x.role === role && x.name === name));
  if (left.length === f.tokens.length) return false;
  writeTokenFile(file, { ...f, tokens: left });
  return true;
}

/**
 * The token file as the server sees it: read again when it changes (mtime and size), so a revoke or a
 * new token takes effect without a restart. A file that breaks keeps the last good list, and says so.
 */
export function tokenFileSource(file: string, onError: (e: Error) => void): () => TokenFile {
  let seen = '';
  let current = TokenFile.parse({});
  return () => {
    let stamp = 'absent';
    try {
      const s = statSync(file);
      stamp = `${s.mtimeMs}/${s.size}`;
    } catch {
      // absent: no tokens
    }
    if (stamp === seen) return current;
    try {
      current = stamp === 'absent' ? TokenFile.parse({}) : readTokenFile(file);
      seen = stamp;
    } catch (e) {
      onError(e as Error);
    }
    return current;
  };
}

/** The agents' tokens of the token file (tokenFileSource). */
export function tokenSource(file: string, onError: (e: Error) => void): () => TokenEntry[] {
  const source = tokenFileSource(file, onError);
  return () => source().tokens;
}
