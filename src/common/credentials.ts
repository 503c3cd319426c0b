import { closeSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError, formatIssues } from './config.ts';

/**
 * Credentials reach a local process on a file descriptor, never in its environment: a tool running as
 * the same user can read every /proc/<pid>/environ of that user, but not a pipe that was read and closed.
 */
export const CREDENTIALS_FD_ENV = 'HOLT_CREDENTIALS_FD';
/** The child's fd the spawner writes the credentials to (stdin, stdout, stderr, then this). */
export const CREDENTIALS_FD = 3;

const Credentials = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string());

/**
 * The environment with the credentials from HOLT_CREDENTIALS_FD merged in (as a new object: nothing is
 * written to process.env, so no child inherits them). Reads the descriptor once and closes it.
 */
export function withCredentials(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const raw = env[CREDENTIALS_FD_ENV];
  if (!raw) return env;
  const fd = Number(raw);
  if (!Number.isInteger(fd) || fd < 3)
    throw new ConfigError(`${CREDENTIALS_FD_ENV}: must be a descriptor ≥ 3`);
  let text: string;
  try {
    text = readFileSync(fd, 'utf8');
  } catch (e) {
    throw new ConfigError(`${CREDENTIALS_FD_ENV}: cannot read descriptor ${fd}: ${(e as Error).message}`);
  } finally {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError(`${CREDENTIALS_FD_ENV}: descriptor ${fd} did not hold a JSON object`);
  }
  const r = Credentials.safeParse(json);
  if (!r.success) throw new ConfigError(`${CREDENTIALS_FD_ENV}: ${formatIssues(r.error)}`);
  const { [CREDENTIALS_FD_ENV]: _fd, ...rest } = env;
  return { ...rest, ...r.data };
}

/** What a spawner adds: the variable naming the descriptor, and the bytes to write to it. */
export function credentialHandoff(secrets: Record<string, string>): {
  env: Record<string, string>;
  payload: string;
} {
  return { env: { [CREDENTIALS_FD_ENV]: String(CREDENTIALS_FD) }, payload: JSON.stringify(secrets) };
}
